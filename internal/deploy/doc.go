// Package deploy holds no code, only tests: they check the container
// packaging at the repository root (Dockerfile, .dockerignore,
// docker-compose.yml) by parsing it, since the build machines have no Docker
// engine. The compose file is loaded with compose-go, the loader Docker
// Compose itself uses; its settings are checked against internal/config and
// its nodes against the peer list; the Dockerfile's `go build` line is run.
package deploy
