package wasmrt

import (
	"bytes"

	"github.com/hashicorp/go-hclog"
)

// headBytes is how much of a call's stderr is kept for the error of a failed call.
const headBytes = 2 << 10

var outOfMemory = []byte("out of memory")

// guestOutput receives one instance's stdout or stderr: it logs complete lines (stdout at
// info, stderr at debug) and keeps the start of what the current call wrote, to explain a
// failure.
type guestOutput struct {
	log    hclog.Logger
	stream string
	line   []byte
	head   []byte
	oom    bool
}

func newGuestOutput(log hclog.Logger, stream string) *guestOutput {
	return &guestOutput{log: log, stream: stream}
}

// Write logs each complete line; it never fails.
func (o *guestOutput) Write(p []byte) (int, error) {
	if room := headBytes - len(o.head); room > 0 {
		o.head = append(o.head, p[:min(room, len(p))]...)
	}
	o.line = append(o.line, p...)
	for {
		i := bytes.IndexByte(o.line, '\n')
		if i < 0 {
			break
		}
		o.emit(o.line[:i])
		o.line = o.line[i+1:]
	}
	if len(o.line) > maxLogBytes {
		o.emit(o.line)
		o.line = o.line[:0]
	}
	if len(o.line) == 0 {
		o.line = nil // drop the consumed buffer
	}
	return len(p), nil
}

func (o *guestOutput) emit(line []byte) {
	if bytes.Contains(line, outOfMemory) {
		o.oom = true
	}
	if o.stream == "stdout" {
		o.log.Info(string(line), "stream", o.stream)
	} else {
		o.log.Debug(string(line), "stream", o.stream)
	}
}

// reset forgets what earlier calls wrote.
func (o *guestOutput) reset() {
	o.head, o.oom = o.head[:0], false
}

// sawOutOfMemory reports whether the current call wrote "out of memory".
func (o *guestOutput) sawOutOfMemory() bool {
	return o.oom || bytes.Contains(o.line, outOfMemory) || bytes.Contains(o.head, outOfMemory)
}

// firstLine returns the first non-empty line the current call wrote.
func (o *guestOutput) firstLine() string {
	for _, l := range bytes.Split(o.head, []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			return string(l)
		}
	}
	return ""
}

// headText returns the start of what the current call wrote.
func (o *guestOutput) headText() string { return string(o.head) }
