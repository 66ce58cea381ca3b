package wasmrt

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// guestSink writes what a module logs (its stdout and stderr lines and keel.log calls) to
// the extension's log as hclog JSON lines, one per line, like a process extension's stderr.
type guestSink struct {
	mu  sync.Mutex
	out io.Writer
}

// write appends one line at a level; a nil sink drops it.
func (s *guestSink) write(level hclog.Level, msg, stream string) {
	if s == nil || s.out == nil {
		return
	}
	rec := map[string]any{"@timestamp": time.Now().UTC().Format(time.RFC3339Nano), "@level": level.String(), "@message": msg}
	if stream != "" {
		rec["stream"] = stream
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.out.Write(append(b, '\n'))
}

// headBytes is how much of a call's stderr is kept for the error of a failed call.
const headBytes = 2 << 10

var outOfMemory = []byte("out of memory")

// guestOutput receives one instance's stdout or stderr: it logs complete lines (stdout at
// info, stderr at debug) and keeps the start of what the current call wrote, to explain a
// failure.
type guestOutput struct {
	log    hclog.Logger
	sink   *guestSink
	stream string
	line   []byte
	head   []byte
	oom    bool
}

func newGuestOutput(log hclog.Logger, sink *guestSink, stream string) *guestOutput {
	return &guestOutput{log: log, sink: sink, stream: stream}
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
	// The extension's own log keeps both streams at info, as it keeps a process
	// extension's plain stderr lines.
	o.sink.write(hclog.Info, validUTF8(line), o.stream)
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
