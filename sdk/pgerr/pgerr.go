// Package pgerr classifies PostgreSQL errors for the HTTP edge, so that the kernel and
// every extension answer the same way when the database cannot be reached: 503 with the
// code database_unavailable, never a 500.
package pgerr

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Message and Code are the client text and code of an answer to a request that needed an
// unreachable database.
const (
	Message = "Database is unavailable; try again shortly"
	Code    = "database_unavailable"
)

// Status is the gRPC status a host service answers when the database is unreachable;
// Unavailable recognises it on the extension side.
func Status() error { return status.Error(codes.Unavailable, Message) }

// Unavailable reports whether err (possibly wrapped) says the database could not be
// reached or went away: a failed connect, a dropped or closed connection, a server that
// is shutting down, starting up or out of connection slots, or a host service answering
// Status. Query errors such as constraint violations are not.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		st := gs.GRPCStatus()
		return st.Code() == codes.Unavailable && st.Message() == Message
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin or crash shutdown, cannot connect now
			return true
		case pe.Code == "53300": // too many connections
			return true
		}
		return false
	}
	if errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne *net.OpError
	return errors.As(err, &ne)
}
