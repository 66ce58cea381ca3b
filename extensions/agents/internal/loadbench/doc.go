// Package loadbench holds the heartbeat engine's capacity benchmark: fifty agents in long
// runs on one node, with the agents, work and routines extensions and the process adapter,
// and what still moves beside them (make bench).
package loadbench
