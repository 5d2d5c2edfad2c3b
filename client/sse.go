package client

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
)

// maxSSELine bounds one line of the event stream.
// One event is one JSON line; the bound keeps a server that never sends
// a newline from growing the buffer without end.
const maxSSELine = 1 << 20

// readSSE parses a server-sent event stream, calling fn per event: id,
// event and data fields (several data lines joined by newlines), comments
// ignored, an event dispatched at each blank line. It returns io.EOF when
// the stream ends, fn's error, or a read error.
func readSSE(r io.Reader, fn func(StreamEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	var ev StreamEvent
	var data [][]byte
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 {
				ev.Data = bytes.Join(data, []byte("\n"))
				if err := fn(ev); err != nil {
					return err
				}
			}
			// The SSE spec keeps the last id across events until a new one comes.
			ev, data = StreamEvent{ID: ev.ID}, nil
			continue
		}
		// Comment lines are the server's heartbeats (see notify.Heartbeat).
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		// The spec strips exactly one leading space, not all whitespace.
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Type = value
		case "data":
			data = append(data, []byte(value))
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read event stream: %w", err)
	}
	return io.EOF
}
