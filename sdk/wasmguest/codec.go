package wasmguest

import (
	"encoding/json"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// This file encodes and decodes the keel.extension.v1 and keel.host.v1 messages the guest
// exchanges with the host, with the field numbers of sdk/proto. Decoding follows proto3:
// unknown fields and fields of an unexpected wire type are skipped, the last scalar wins,
// repeated and map fields accumulate.

type encoder struct{ b []byte }

func (e *encoder) string(n protowire.Number, s string) {
	if s != "" {
		e.b = protowire.AppendTag(e.b, n, protowire.BytesType)
		e.b = protowire.AppendString(e.b, s)
	}
}

func (e *encoder) bytes(n protowire.Number, v []byte) {
	if len(v) > 0 {
		e.b = protowire.AppendTag(e.b, n, protowire.BytesType)
		e.b = protowire.AppendBytes(e.b, v)
	}
}

func (e *encoder) int32(n protowire.Number, v int32) {
	if v != 0 {
		e.b = protowire.AppendTag(e.b, n, protowire.VarintType)
		e.b = protowire.AppendVarint(e.b, uint64(int64(v)))
	}
}

func (e *encoder) bool(n protowire.Number, v bool) {
	if v {
		e.b = protowire.AppendTag(e.b, n, protowire.VarintType)
		e.b = protowire.AppendVarint(e.b, 1)
	}
}

// message appends a length-delimited submessage written by f (present even when empty).
func (e *encoder) message(n protowire.Number, f func(*encoder)) {
	var sub encoder
	f(&sub)
	e.b = protowire.AppendTag(e.b, n, protowire.BytesType)
	e.b = protowire.AppendBytes(e.b, sub.b)
}

// str returns b as a string without copying. Decoded messages alias their input, which is
// never written again: a request block the host filled and no longer touches, or a host
// call result the guest took out of its allocations. (A string kept long after the call
// keeps that whole block alive; clone it with strings.Clone to keep just the string.)
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// field is one decoded field: val for length-delimited fields, num for the others.
type field struct {
	n   protowire.Number
	typ protowire.Type
	val []byte
	num uint64
}

func (f field) is(n protowire.Number, typ protowire.Type) bool { return f.n == n && f.typ == typ }

// decode calls fn for each field of the message in b.
func decode(b []byte, fn func(f field) error) error {
	var f field
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		f = field{n: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.num, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.val, n = protowire.ConsumeBytes(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			f.num = uint64(v)
		case protowire.Fixed64Type:
			f.num, n = protowire.ConsumeFixed64(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// Actor (keel.extension.v1.Actor).

func (a *Actor) encode(e *encoder) {
	e.string(1, a.Type)
	e.string(2, a.UserID)
	e.string(3, a.AgentID)
	e.string(4, a.CompanyID)
	e.string(5, a.RunID)
	e.string(6, a.Source)
	e.bool(7, a.IsInstanceAdmin)
	for _, id := range a.CompanyIDs {
		e.b = protowire.AppendTag(e.b, 8, protowire.BytesType)
		e.b = protowire.AppendString(e.b, id)
	}
	e.string(9, a.KeyID)
}

// decodeActor decodes into a (nil starts a new Actor): a message field repeated on the wire
// merges, as protobuf does.
func decodeActor(a *Actor, b []byte) (*Actor, error) {
	if a == nil {
		a = &Actor{}
	}
	err := decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			a.Type = str(f.val)
		case f.is(2, protowire.BytesType):
			a.UserID = str(f.val)
		case f.is(3, protowire.BytesType):
			a.AgentID = str(f.val)
		case f.is(4, protowire.BytesType):
			a.CompanyID = str(f.val)
		case f.is(5, protowire.BytesType):
			a.RunID = str(f.val)
		case f.is(6, protowire.BytesType):
			a.Source = str(f.val)
		case f.is(7, protowire.VarintType):
			a.IsInstanceAdmin = f.num != 0
		case f.is(8, protowire.BytesType):
			a.CompanyIDs = append(a.CompanyIDs, str(f.val))
		case f.is(9, protowire.BytesType):
			a.KeyID = str(f.val)
		}
		return nil
	})
	return a, err
}

// Error (keel.extension.v1.Error).

func (e *Error) encode(enc *encoder) {
	status := e.Status
	if status == 0 {
		status = 500
	}
	enc.int32(1, int32(status))
	enc.string(2, e.Message)
	enc.string(3, e.Code)
	if e.Details != nil {
		if b, err := json.Marshal(e.Details); err == nil {
			enc.bytes(4, b)
		}
	}
	source := e.Source
	if source == "" {
		source = SourcePlugin
	}
	enc.string(5, source)
}

// decodeError decodes into e (nil starts a new Error), merging like decodeActor.
func decodeError(e *Error, b []byte) (*Error, error) {
	if e == nil {
		e = &Error{}
	}
	err := decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.VarintType):
			e.Status = int(int32(f.num))
		case f.is(2, protowire.BytesType):
			e.Message = str(f.val)
		case f.is(3, protowire.BytesType):
			e.Code = str(f.val)
		case f.is(4, protowire.BytesType):
			e.Details = nil
			if v := rawJSON(f.val); v != nil {
				e.Details = v
			}
		case f.is(5, protowire.BytesType):
			e.Source = str(f.val)
		}
		return nil
	})
	return e, err
}

// protoError converts an error returned by the extension into the wire Error.
func protoError(err error) *Error {
	if e, ok := err.(*Error); ok {
		return e
	}
	return &Error{Status: 500, Message: err.Error(), Source: SourcePlugin}
}

// httpRequest is keel.extension.v1.HTTPRequest.
type httpRequest struct {
	Method    string
	Path      string
	Pattern   string
	Params    map[string]string
	RawQuery  string
	Headers   map[string][]string
	Body      []byte
	Actor     *Actor
	CompanyID string
	RequestID string
}

func decodeHTTPRequest(b []byte) (*httpRequest, error) {
	r := &httpRequest{}
	err := decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			r.Method = str(f.val)
		case f.is(2, protowire.BytesType):
			r.Path = str(f.val)
		case f.is(3, protowire.BytesType):
			r.Pattern = str(f.val)
		case f.is(4, protowire.BytesType):
			k, v, err := decodeStringMapEntry(f.val)
			if err != nil {
				return err
			}
			if r.Params == nil {
				r.Params = map[string]string{}
			}
			r.Params[k] = v
		case f.is(5, protowire.BytesType):
			r.RawQuery = str(f.val)
		case f.is(6, protowire.BytesType):
			k, vs, err := decodeHeaderEntry(f.val)
			if err != nil {
				return err
			}
			if r.Headers == nil {
				r.Headers = map[string][]string{}
			}
			r.Headers[k] = vs
		case f.is(7, protowire.BytesType):
			r.Body = f.val
		case f.is(8, protowire.BytesType):
			a, err := decodeActor(r.Actor, f.val)
			if err != nil {
				return err
			}
			r.Actor = a
		case f.is(9, protowire.BytesType):
			r.CompanyID = str(f.val)
		case f.is(10, protowire.BytesType):
			r.RequestID = str(f.val)
		}
		return nil
	})
	return r, err
}

func decodeStringMapEntry(b []byte) (k, v string, err error) {
	err = decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			k = str(f.val)
		case f.is(2, protowire.BytesType):
			v = str(f.val)
		}
		return nil
	})
	return k, v, err
}

// decodeHeaderEntry decodes one map<string, HeaderValues> entry.
func decodeHeaderEntry(b []byte) (k string, vs []string, err error) {
	err = decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			k = str(f.val)
		case f.is(2, protowire.BytesType): // HeaderValues; a repeated value merges
			return decode(f.val, func(f field) error {
				if f.is(1, protowire.BytesType) {
					vs = append(vs, str(f.val))
				}
				return nil
			})
		}
		return nil
	})
	return k, vs, err
}

// encodeHTTPResponse encodes keel.extension.v1.HTTPResponse.
func encodeHTTPResponse(e *encoder, status int, headers map[string][]string, body []byte) {
	e.int32(1, int32(status))
	for k, vs := range headers {
		e.message(2, func(e *encoder) {
			e.string(1, k)
			e.message(2, func(e *encoder) {
				for _, v := range vs {
					e.b = protowire.AppendTag(e.b, 1, protowire.BytesType)
					e.b = protowire.AppendString(e.b, v)
				}
			})
		})
	}
	e.bytes(3, body)
}

// decodeEnv decodes keel.extension.v1.ConfigureRequest.
func decodeEnv(b []byte) (*Env, error) {
	env := &Env{}
	err := decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			env.Config = rawJSON(f.val)
		case f.is(4, protowire.BytesType):
			env.DataDir = str(f.val)
		case f.is(5, protowire.BytesType):
			env.InstanceID = str(f.val)
		case f.is(6, protowire.BytesType):
			env.APIURL = str(f.val)
		case f.is(7, protowire.BytesType):
			env.KernelVersion = str(f.val)
		}
		return nil
	})
	return env, err
}

// decodeMethodCall decodes keel.extension.v1.CallRequest.
func decodeMethodCall(b []byte) (*MethodCall, error) {
	c := &MethodCall{}
	err := decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			c.Method = str(f.val)
		case f.is(2, protowire.BytesType):
			c.Input = rawJSON(f.val)
		case f.is(3, protowire.BytesType):
			a, err := decodeActor(c.Actor, f.val)
			if err != nil {
				return err
			}
			c.Actor = a
		case f.is(4, protowire.BytesType):
			c.Caller = str(f.val)
		case f.is(5, protowire.BytesType):
			c.CompanyID = str(f.val)
		}
		return nil
	})
	return c, err
}

// decodeJobRun decodes keel.extension.v1.RunJobRequest.
func decodeJobRun(b []byte) (*JobRun, error) {
	j := &JobRun{}
	err := decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			j.Key = str(f.val)
		case f.is(2, protowire.BytesType):
			j.Args = rawJSON(f.val)
		case f.is(3, protowire.VarintType):
			j.Attempt = int(int32(f.num))
		case f.is(4, protowire.BytesType):
			j.ID = str(f.val)
		}
		return nil
	})
	return j, err
}

// decodeEvent decodes keel.extension.v1.Event.
func decodeEvent(b []byte) (*Event, error) {
	ev := &Event{}
	err := decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			ev.ID = str(f.val)
		case f.is(2, protowire.BytesType):
			ev.Type = str(f.val)
		case f.is(3, protowire.BytesType):
			ev.CompanyID = str(f.val)
		case f.is(4, protowire.BytesType):
			ev.Payload = rawJSON(f.val)
		case f.is(5, protowire.BytesType):
			ev.OccurredAt = str(f.val)
		case f.is(6, protowire.BytesType):
			ev.Source = str(f.val)
		}
		return nil
	})
	return ev, err
}

// rawJSON returns b as JSON, nil when empty.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// Host service messages (keel.host.v1).

func (r *AppendActivityRequest) encode(e *encoder) {
	e.string(1, r.CompanyID)
	e.string(2, r.ActorType)
	e.string(3, r.ActorID)
	e.string(4, r.Action)
	e.string(5, r.EntityType)
	e.string(6, r.EntityID)
	e.string(7, r.AgentID)
	e.string(8, r.RunID)
	e.bytes(9, r.DetailsJSON)
}

func (r *AppendActivityResponse) decode(b []byte) error {
	return decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			r.ID = str(f.val)
		case f.is(2, protowire.BytesType):
			r.CreatedAt = str(f.val)
		}
		return nil
	})
}

func (r *CheckRequest) encode(e *encoder) {
	if r.Actor != nil {
		e.message(1, r.Actor.encode)
	}
	e.string(2, r.CompanyID)
	e.string(3, r.Permission)
}

func (r *CheckResponse) decode(b []byte) error {
	return decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.VarintType):
			r.Allowed = f.num != 0
		case f.is(2, protowire.BytesType):
			r.Reason = str(f.val)
		}
		return nil
	})
}

func (a *AgentIdentity) decode(b []byte) error {
	return decode(b, func(f field) error {
		if f.typ != protowire.BytesType {
			return nil
		}
		switch f.n {
		case 1:
			a.ID = str(f.val)
		case 2:
			a.CompanyID = str(f.val)
		case 3:
			a.Name = str(f.val)
		case 4:
			a.URLKey = str(f.val)
		case 5:
			a.Role = str(f.val)
		case 6:
			a.Status = str(f.val)
		case 7:
			a.CreatedAt = str(f.val)
		case 8:
			a.UpdatedAt = str(f.val)
		}
		return nil
	})
}

func (r *InvokeRequest) encode(e *encoder) {
	e.string(1, r.Method)
	e.bytes(2, r.InputJSON)
	if r.Actor != nil {
		e.message(3, r.Actor.encode)
	}
	e.string(4, r.CompanyID)
}

func (r *InvokeResponse) decode(b []byte) error {
	return decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			r.OutputJSON = rawJSON(f.val)
		case f.is(2, protowire.BytesType):
			e, err := decodeError(r.Error, f.val)
			if err != nil {
				return err
			}
			r.Error = e
		}
		return nil
	})
}

func (r *EnqueueRequest) encode(e *encoder) {
	e.string(1, r.JobKey)
	e.bytes(2, r.ArgsJSON)
	e.string(3, r.UniqueKey)
	e.string(4, r.RunAt)
	e.int32(5, r.MaxAttempts)
}

func (r *EnqueueResponse) decode(b []byte) error {
	return decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			r.JobID = str(f.val)
		case f.is(2, protowire.VarintType):
			r.Duplicate = f.num != 0
		}
		return nil
	})
}

func (r *PublishRequest) encode(e *encoder) {
	e.string(1, r.Type)
	e.string(2, r.CompanyID)
	e.bytes(3, r.PayloadJSON)
}

func (r *PublishResponse) decode(b []byte) error {
	return decode(b, func(f field) error {
		if f.is(1, protowire.BytesType) {
			r.ID = str(f.val)
		}
		return nil
	})
}

func (r *ResolveSecretRequest) encode(e *encoder) {
	e.string(1, r.CompanyID)
	e.string(2, r.SecretID)
	e.int32(3, r.Version)
}

func (r *ResolveSecretResponse) decode(b []byte) error {
	return decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			r.Value = str(f.val)
		case f.is(2, protowire.VarintType):
			r.Version = int32(f.num)
		}
		return nil
	})
}

// decodeBytesField returns field n of a message whose only interesting field is bytes
// (CompanyResponse, GetSettingsResponse).
func decodeBytesField(b []byte, n protowire.Number) ([]byte, error) {
	var out []byte
	err := decode(b, func(f field) error {
		if f.is(n, protowire.BytesType) {
			out = f.val
		}
		return nil
	})
	return out, err
}

// decodeStorageGet decodes keel.host.v1.StorageGetResponse.
func decodeStorageGet(b []byte) (value []byte, found bool, err error) {
	err = decode(b, func(f field) error {
		switch {
		case f.is(1, protowire.BytesType):
			value = f.val
		case f.is(2, protowire.VarintType):
			found = f.num != 0
		}
		return nil
	})
	return value, found, err
}

// decodeBoolField returns bool field n (StorageDeleteResponse.deleted).
func decodeBoolField(b []byte, n protowire.Number) (bool, error) {
	var out bool
	err := decode(b, func(f field) error {
		if f.is(n, protowire.VarintType) {
			out = f.num != 0
		}
		return nil
	})
	return out, err
}
