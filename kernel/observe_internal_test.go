package kernel

import (
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

type nopObserver struct{}

func (nopObserver) ObserveRequest(*RequestRecord) {}

// BenchmarkObserveMiddleware measures what the request observer middleware adds to a
// request (timing, the record, noting the route), against the same app without it.
func BenchmarkObserveMiddleware(b *testing.B) {
	route := &Route{Method: "GET", Pattern: "/api/companies/{companyId}", Owner: "kernel"}
	actor := &Actor{Type: ActorBoard}
	for _, tc := range []struct {
		name     string
		observer RequestObserver
	}{{"Without", nil}, {"With", nopObserver{}}} {
		b.Run(tc.name, func(b *testing.B) {
			k := &Kernel{observer: tc.observer}
			app := fiber.New(fiber.Config{DisableStartupMessage: true})
			app.Use(k.observe)
			app.Get("/api/companies/:id", func(c *fiber.Ctx) error {
				if k.observer != nil {
					noteRoute(c, "req-1", route, actor)
				}
				return c.SendStatus(fiber.StatusOK)
			})
			h := app.Handler()
			var ctx fasthttp.RequestCtx
			ctx.Request.SetRequestURI("/api/companies/6f1c0c3e-0000-4000-8000-000000000001")
			ctx.Request.Header.SetMethod("GET")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				h(&ctx)
				ctx.Response.Reset()
			}
		})
	}
}
