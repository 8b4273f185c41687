package api

import "github.com/go-chi/chi/v5"

// Routes is s's router, for tests outside the package that walk it
// (chi.Walk).
func (s *Server) Routes() chi.Routes { return s.router }

// SetEraseChunk sets how many documents an erase reads and deletes at a
// time, until the test ends.
func SetEraseChunk(t interface{ Cleanup(func()) }, n int) {
	before := eraseChunk
	eraseChunk = n
	t.Cleanup(func() { eraseChunk = before })
}
