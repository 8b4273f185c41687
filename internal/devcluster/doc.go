// Package devcluster is `shoal dev`: a local cluster of Shoal nodes on
// loopback, run as child processes of one command.
//
// Its parts:
//
//   - setup.go prepares the cluster directory: the shared secrets
//     (secrets.env), the peer list (peers.json) and the admin and user
//     tokens.
//   - peers.go writes and edits the peer list (`shoal dev add-node` and
//     `remove-node`) and compares two versions of it.
//   - nodes.go says which peers run here (those on loopback), whether their
//     ports are free and which environment a node process gets.
//   - process.go is the small interface the supervisor starts processes
//     through (Starter, Process) and its os/exec implementation.
//   - supervisor.go starts the nodes, follows the peer list, reports a node
//     that exits, and stops them all; drain.go stops a node taken out of the
//     peer list once it holds nothing.
//   - output.go prefixes every line a node prints with its id and keeps the
//     last lines of each node, to show when one does not come up.
//   - text.go quotes paths for the shell and words counts and ids the way
//     `shoal status` does.
//
// The command in cmd/shoal parses the flags, prints --help and calls in here.
package devcluster
