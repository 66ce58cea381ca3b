package cases

import (
	"strings"
	"testing"
)

// BenchmarkLocate re-anchors a quote that occurs ~2,000 times in a 200 KB body.
func BenchmarkLocate(b *testing.B) {
	para := "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore. "
	body := strings.Repeat(para, 2000)
	a := Anchor{Quote: "consectetur adipiscing", Prefix: "Lorem ipsum dolor sit amet, ", Suffix: " elit", Start: 1000}
	for b.Loop() {
		if _, ok := locate(body, a); !ok {
			b.Fatal("not found")
		}
	}
}
