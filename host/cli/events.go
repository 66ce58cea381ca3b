package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelhq/keel/sdk/client"
)

// eventsCommand follows a company's activity live: one line per entry (or the entry's JSON
// with --json), reconnecting after the last entry it printed when the connection drops.
func eventsCommand(o *options) *cobra.Command {
	var f client.EventFilter
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Follow the company's activity live (Ctrl-C to stop)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, companyID, err := o.companyClient(cmd)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			return c.Events(cmd.Context(), companyID, f, func(e *client.ActivityEntry) error {
				if o.json {
					_, err := fmt.Fprintf(w, "%s\n", e.JSON())
					return err
				}
				actor := e.ActorType
				if e.ActorID != "" {
					actor += ":" + e.ActorID
				}
				_, err := fmt.Fprintf(w, "%s  %-28s %-32s %s %s\n", e.CreatedAt.Local().Format(time.DateTime), e.Action, actor, e.EntityType, e.EntityID)
				return err
			})
		},
	}
	o.addFlags(cmd, true)
	fl := cmd.Flags()
	fl.StringVar(&f.EntityType, "entity-type", "", "only entries about this kind of entity (issue, agent, …)")
	fl.StringVar(&f.EntityID, "entity-id", "", "only entries about this entity")
	fl.StringVar(&f.Action, "action", "", "only entries with this action (issue.created, …)")
	fl.StringVar(&f.After, "after", "", "start after this entry id, replaying what followed it")
	return cmd
}
