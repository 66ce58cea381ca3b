package supervisor

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLogRing(t *testing.T) {
	t.Parallel()

	t.Run("ParsesLinesArrivingInPieces", func(t *testing.T) {
		t.Parallel()
		r := &logRing{}
		_, _ = r.Write([]byte(`{"@level":"warn","@message":"disk low","@timestamp":"2026-01-02T03:04:05.000000Z","free":12`))
		_, _ = r.Write([]byte("}\n[ERROR] plain failure\npanic: boom\nno prefix"))
		lines := r.snapshot()
		require.Len(t, lines, 3, "the unfinished last line waits for its newline")
		require.Equal(t, "warn", lines[0].Level)
		require.Equal(t, "disk low", lines[0].Message)
		require.EqualValues(t, 12, lines[0].Fields["free"])
		require.Equal(t, 2026, lines[0].Time.Year())
		require.Equal(t, "error", lines[1].Level)
		require.Equal(t, "plain failure", lines[1].Message)
		require.Equal(t, "error", lines[2].Level, "a panic is an error")
		_, _ = r.Write([]byte("\n"))
		require.Equal(t, "info", r.snapshot()[3].Level)
	})

	t.Run("CutsHugeLines", func(t *testing.T) {
		t.Parallel()
		r := &logRing{}
		_, _ = r.Write(append(bytes.Repeat([]byte("x"), 3*maxLogLine), '\n'))
		l := r.snapshot()[0]
		require.Len(t, l.Message, maxLogLine)
		require.Equal(t, 3*maxLogLine, l.Fields["truncated"])
	})

	t.Run("KeepsTheMostRecent", func(t *testing.T) {
		t.Parallel()
		r := &logRing{}
		for i := range logRingSize + 5 {
			_, _ = r.Write([]byte(fmt.Sprintf("line %d\n", i)))
		}
		lines := r.snapshot()
		require.Len(t, lines, logRingSize)
		require.Equal(t, "line 5", lines[0].Message)
		require.Equal(t, fmt.Sprintf("line %d", logRingSize+4), lines[len(lines)-1].Message)
	})
}
