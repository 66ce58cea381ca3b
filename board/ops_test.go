package board_test

import (
	"testing"
)

// TestBoardOps covers the routine and cost pages on one local_trusted host.
func TestBoardOps(t *testing.T) {
	t.Parallel()
	h, _ := startLocal(t)
	t.Run("Routines", func(t *testing.T) {
		t.Parallel()
		testRoutines(t, h, h.CreateCompany("Routines Co"))
	})
	t.Run("Costs", func(t *testing.T) {
		t.Parallel()
		testCosts(t, h, h.CreateCompany("Costs Co"))
	})
}
