package api

import "github.com/go-chi/chi/v5"

// Routes is s's router, for tests outside the package that walk it
// (chi.Walk).
func (s *Server) Routes() chi.Routes { return s.router }
