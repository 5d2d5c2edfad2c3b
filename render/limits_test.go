package render

import (
	"fmt"
	"strings"
	"testing"
)

func TestAReleasePastMaxServicesIsRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range MaxServices + 1 {
		fmt.Fprintf(&b, "  s%d: {image: busybox}\n", i)
	}
	_, err := Load(t.Context(), "compose.yaml", []byte(b.String()), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "compose.yaml") || !strings.Contains(err.Error(), "1001 services; a release holds at most 1000") {
		t.Fatalf("Load of %d services = %v", MaxServices+1, err)
	}
	b.Reset()
	b.WriteString("services:\n  web: {image: busybox}\n")
	if _, err := Load(t.Context(), "compose.yaml", []byte(b.String()), nil, nil); err != nil {
		t.Fatalf("one service: %v", err)
	}
}
