package supervisor

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/keelhq/keel/kernel"
	hostv1 "github.com/keelhq/keel/sdk/proto/host/v1"
)

// CallMethod lets the kernel call a provided method (kernel.MethodCaller): the call goes
// through Invoke as caller "kernel", and an error answer becomes a *kernel.APIError with the
// owner's status, text and code.
func (s *Supervisor) CallMethod(ctx context.Context, method, companyID string, actor *kernel.Actor, input []byte) ([]byte, error) {
	res, err := s.Invoke(ctx, "kernel", &hostv1.InvokeRequest{Method: method, InputJson: input, Actor: ProtoActor(actor), CompanyId: companyID})
	if err != nil {
		return nil, err
	}
	if e := res.Error; e != nil {
		status := int(e.Status)
		if status == 0 {
			status = http.StatusBadGateway
		}
		apiErr := &kernel.APIError{Status: status, Message: e.Message, Code: e.Code}
		if len(e.DetailsJson) > 0 {
			apiErr.Details = json.RawMessage(e.DetailsJson)
		}
		return nil, apiErr
	}
	return res.OutputJson, nil
}

var _ kernel.MethodCaller = (*Supervisor)(nil)
