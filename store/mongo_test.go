package store

import (
	"context"
	"testing"

	"github.com/shoal-db/shoal/internal/storetest"
	"github.com/shoal-db/shoal/store/engine/enginetest"
)

// The MongoDB engine passes the engines' conformance suite, on a FerretDB
// reached by URI (with its indexes).
func TestTheMongoEngineConforms(t *testing.T) {
	t.Run("uri", func(t *testing.T) {
		mongo := storetest.Start(t)
		n := 0
		enginetest.Run(t, func(t *testing.T) enginetest.Engine {
			ctx := context.Background()
			n++
			s, err := Open(ctx, Options{URI: mongo.URI, Database: "conform" + string(rune('a'+n))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close(ctx) })
			return s.docs.(*mongoEngine)
		})
	})
}
