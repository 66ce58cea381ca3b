package hostsvc_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelhq/keel/host/hostsvc"
	"github.com/keelhq/keel/host/pgembed/pgtest"
	"github.com/keelhq/keel/kernel"
	"github.com/keelhq/keel/sdk"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// TestNextIssueNumberRanges calls Companies.NextIssueNumber as an extension does: without a
// count it reserves one number (first and last the same), with a count it reserves that
// many consecutive numbers and names the last; a count out of 1..256, an unknown company
// and an extension without the companies capability are refused.
func TestNextIssueNumberRanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, err := kernel.New(ctx, pgtest.NewDatabase(t), kernel.Config{})
	require.NoError(t, err)
	t.Cleanup(k.Close)
	c, err := k.CompanyInsert(ctx, &kernel.CompanyInsertParams{Name: "Range Co"})
	require.NoError(t, err)
	svc := hostsvc.New(&sdk.Manifest{Key: "test.numbers", Capabilities: []string{sdk.CapCompanies}}, hostsvc.Deps{Kernel: k})

	res, err := svc.Companies.NextIssueNumber(ctx, &hostv1.NextIssueNumberRequest{CompanyId: c.ID})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 1}, []int64{res.FirstNumber, res.Number})
	require.Equal(t, c.IssuePrefix+"-1", res.Identifier)
	require.Equal(t, c.IssuePrefix, res.IssuePrefix)

	res, err = svc.Companies.NextIssueNumber(ctx, &hostv1.NextIssueNumberRequest{CompanyId: c.ID, Count: 5})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 6}, []int64{res.FirstNumber, res.Number})
	require.Equal(t, c.IssuePrefix+"-6", res.Identifier)

	res, err = svc.Companies.NextIssueNumber(ctx, &hostv1.NextIssueNumberRequest{CompanyId: c.ID, Count: kernel.IssueNumbersMax})
	require.NoError(t, err)
	require.Equal(t, []int64{7, 6 + kernel.IssueNumbersMax}, []int64{res.FirstNumber, res.Number})

	for _, n := range []int32{-1, kernel.IssueNumbersMax + 1} {
		_, err = svc.Companies.NextIssueNumber(ctx, &hostv1.NextIssueNumberRequest{CompanyId: c.ID, Count: n})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "count %d: %v", n, err)
	}
	_, err = svc.Companies.NextIssueNumber(ctx, &hostv1.NextIssueNumberRequest{CompanyId: uuid.NewString()})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)

	// The refusals advanced nothing.
	res, err = svc.Companies.NextIssueNumber(ctx, &hostv1.NextIssueNumberRequest{CompanyId: c.ID})
	require.NoError(t, err)
	require.Equal(t, 7+int64(kernel.IssueNumbersMax), res.Number)

	denied := hostsvc.New(&sdk.Manifest{Key: "test.nocaps"}, hostsvc.Deps{Kernel: k})
	_, err = denied.Companies.NextIssueNumber(ctx, &hostv1.NextIssueNumberRequest{CompanyId: c.ID, Count: 2})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
}
