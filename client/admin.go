package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"

	"github.com/shoal-db/shoal/api/wire"
)

// Health asks GET /healthz: the node's process answers (Status "ok").
func (c *Client) Health(ctx context.Context) (wire.NodeStatus, error) {
	const path = "/healthz"
	a, err := c.get(ctx, path, "")
	if err != nil {
		return wire.NodeStatus{}, err
	}
	var s wire.NodeStatus
	return s, a.decode(path, "health", &s)
}

// Ready asks GET /readyz (or the URL of the ReadyURL option): nil when the
// node takes traffic. A node starting or stopping, or whose store does not
// answer, answers 503: an *HTTPError matching ErrUnavailable. Readiness is
// the status code alone, so a 200 whose body is not the node's JSON (a
// proxy's own check), or breaks off, is ready too, with an empty status.
func (c *Client) Ready(ctx context.Context) (wire.NodeStatus, error) {
	a, err := c.getURL(ctx, c.readyURL, "/readyz")
	var be *bodyError
	if errors.As(err, &be) {
		return wire.NodeStatus{}, nil
	}
	if err != nil {
		return wire.NodeStatus{}, err
	}
	var s wire.NodeStatus
	_ = json.Unmarshal(a.body, &s)
	return s, nil
}

// ClusterStatus is a node's answer to GET /v1/cluster.
type ClusterStatus struct {
	wire.ClusterAnswer
	// InPeerListUnknown says the answer does not say which members are in
	// the answering node's peer list (a node built before in_peer_list):
	// every member's InPeerList then reads false and means nothing. See
	// Unlisted.
	InPeerListUnknown bool `json:"-"`
}

// Unlisted reports whether the answering node says m is out of its peer
// list: a member gossiping without being listed, or one removed from the
// list that drains. Never when the answer does not say.
func (s ClusterStatus) Unlisted(m wire.MemberStatus) bool {
	return !s.InPeerListUnknown && !m.InPeerList
}

// Cluster asks GET /v1/cluster (an admin token): the membership as the
// node sees it, its partition counts, the lease voters, the replicas
// behind on the partitions it masters and the partitions moving from it.
// An answer with neither "node" nor "members" is an *AnswerError.
func (c *Client) Cluster(ctx context.Context) (ClusterStatus, error) {
	const path, what = "/v1/cluster", "cluster status"
	a, err := c.get(ctx, path, "")
	if err != nil {
		return ClusterStatus{}, err
	}
	var s ClusterStatus
	if err := a.decode(path, what, &s.ClusterAnswer); err != nil {
		return ClusterStatus{}, err
	}
	if s.Node == "" && s.Members == nil {
		return ClusterStatus{}, &AnswerError{Method: "GET", Path: path, What: what, ContentType: a.contentType,
			Missing: `no "node" or "members" field`}
	}
	// A member's in_peer_list is a bool on the node's side: whether the
	// answer carried it is only seen here.
	var said struct {
		Members []struct {
			InPeerList *bool `json:"in_peer_list"`
		} `json:"members"`
	}
	if json.Unmarshal(a.body, &said) == nil {
		for _, m := range said.Members {
			if m.InPeerList == nil {
				s.InPeerListUnknown = true
			}
		}
	}
	return s, nil
}

// Placement asks GET /v1/users/{user}/placement (a token of user, or an
// admin's): the partition of user and where it lives as the node sees it,
// how far the node holds it and, on its master, each replica's progress.
func (c *Client) Placement(ctx context.Context, user string) (wire.PlacementView, error) {
	path := "/v1/users/" + url.PathEscape(user) + "/placement"
	a, err := c.get(ctx, path, "")
	if err != nil {
		return wire.PlacementView{}, err
	}
	var p wire.PlacementView
	return p, a.decode(path, "placement", &p)
}

// Rollbacks asks GET /v1/admin/rollback (an admin token): the node's
// rollback collection, oldest first, at most limit documents (from 1 to
// 10000; 0: the node's default, 1000).
func (c *Client) Rollbacks(ctx context.Context, limit int) (wire.RollbackList, error) {
	const path = "/v1/admin/rollback"
	query := ""
	if limit != 0 {
		query = "limit=" + strconv.Itoa(limit)
	}
	a, err := c.get(ctx, path, query)
	if err != nil {
		return wire.RollbackList{}, err
	}
	var l wire.RollbackList
	return l, a.decode(path, "rollback list", &l)
}
