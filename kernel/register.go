package kernel

// registerRoutes mounts every kernel endpoint into the route table. Extension routes are
// added later by the host, one manifest at a time, with the same collision checks.
func (k *Kernel) registerRoutes() error {
	var routes []*Route
	for _, group := range [][]*Route{
		k.healthRoutes(),
		k.pluginRoutes(),
		k.pluginLifecycleRoutes(),
		k.pluginExampleRoutes(),
		k.pluginFeatureRoutes(),
		k.pluginManagedRoutes(),
		k.companyRoutes(),
		k.activityRoutes(),
		k.settingsRoutes(),
		k.memberRoutes(),
		k.openAPIRoutes(),
		k.authRoutes(),
		k.boardKeyRoutes(),
		k.cliAuthRoutes(),
		k.agentKeyRoutes(),
		k.inviteRoutes(),
		k.inviteOnboardingRoutes(),
		k.joinRequestRoutes(),
		k.userRoutes(),
		k.boardClaimRoutes(),
		k.preferenceRoutes(),
	} {
		routes = append(routes, group...)
	}
	return k.Routes.Add(routes...)
}
