// Package nodeid holds the one rule for node ids, shared by the peer list,
// the signed internal requests, gossip metadata and the partition table.
package nodeid

import (
	"errors"
	"fmt"

	"github.com/shoal-db/shoal/internal/logsafe"
)

// MaxLen is the longest node id.
const MaxLen = 64

// Check checks a node id: [A-Za-z0-9][A-Za-z0-9._-]{0,63}. Its error
// quotes at most a clipped id.
func Check(id string) error {
	if id == "" {
		return errors.New(`"id" is missing`)
	}
	if len(id) > MaxLen {
		return fmt.Errorf("node id %q is longer than %d characters", logsafe.ClipTo(id, MaxLen), MaxLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("node id %q must start with a letter or digit and contain only letters, digits, '.', '_' and '-'", id)
		}
	}
	return nil
}
