package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/devcerts"
	"github.com/shoal-db/shoal/internal/devcluster"
	"github.com/shoal-db/shoal/internal/nodetls"
	"github.com/shoal-db/shoal/internal/wording"
)

// defaultNodeURL is where `shoal status` looks when nothing else says where.
const defaultNodeURL = "http://127.0.0.1:8080"

// Where a member stands towards the peer list, for a member out of it.
const (
	inList      = ""
	outUnknown  = "unknown"  // not in the list, and the node gives no partition counts
	outDraining = "draining" // removed from the list, still masters or holds copies (or unchecked writes)
	outRemoved  = "removed"  // removed from the list and holds nothing: safe to stop
)

// listing says where m stands towards the peer list of st's node, by the
// partitions its table gives m (and, for the answering node itself, the
// writes of its own no later master has checked).
func listing(st client.ClusterStatus, m cluster.MemberStatus) string {
	ps := st.Partitions
	switch {
	case !st.Unlisted(m):
		return inList
	case ps == nil:
		return outUnknown
	case ps.Masters[m.ID] > 0 || ps.Copies[m.ID] > 0 || ps.Unreconciled[m.ID] > 0:
		return outDraining
	default:
		return outRemoved
	}
}

func status(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "node to ask (default: $SHOAL_URL, else the first peer's url in DIR/peers.json, else "+defaultNodeURL+")")
	tok := fs.String("token", "", "admin token (default: $SHOAL_TOKEN, else the file DIR/admin.token)")
	dir := fs.String("dir", ".shoal-dev", "directory of a shoal dev cluster, for the defaults of --url, --token and --ca")
	ca := fs.String("ca", "", "PEM CA to verify https nodes with (default: $SHOAL_CA, else DIR/certs/ca.pem when it exists, else the system's roots)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal status [--url URL] [--token TOKEN] [--dir .shoal-dev] [--ca FILE]")
		fmt.Fprintln(stderr, "Shows the cluster as one node sees it: its peer list, every member's state and partitions")
		fmt.Fprintln(stderr, "(GET /v1/cluster), and the partitions moving, asked of every member that is UP.")
		fs.PrintDefaults()
	}
	if code, done := parseArgs(fs, args, stderr, 2); done {
		return code
	}
	target := statusURL(*url, *dir)
	token, tokenFrom := statusToken(*tok, *dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t, err := caTransport(devCA(*ca, *dir))
	if err != nil {
		fmt.Fprintf(stderr, "shoal status: %v\n", err)
		return 1
	}
	hc := &http.Client{Transport: t}
	st, err := client.New(target.url, token, client.WithHTTPClient(hc)).Cluster(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "shoal status: %s\n", explainStatusError(err, target, tokenFrom))
		return 1
	}
	others := fetchMoves(ctx, hc, st, token, movesTimeout)
	fmt.Fprint(stdout, renderStatus(st, others, target.url, time.Now()))
	return 0
}

// devCA is the CA the cluster commands verify https nodes with: --ca,
// else $SHOAL_CA, else a `shoal dev --tls` directory's (dir, "" for
// none) when it exists; "" for none (the system's roots).
func devCA(ca, dir string) string {
	if ca == "" {
		ca = os.Getenv("SHOAL_CA")
	}
	if ca == "" && dir != "" {
		if p := filepath.Join(devcluster.CertDir(dir), devcerts.CAFile); fileExists(p) {
			ca = p
		}
	}
	return ca
}

// caTransport is a transport that verifies https nodes with the CA in the
// file ca; with ca "", the default transport's clone.
func caTransport(ca string) (*http.Transport, error) {
	if ca == "" {
		return http.DefaultTransport.(*http.Transport).Clone(), nil
	}
	m, err := nodetls.Load(nodetls.Files{CA: ca}, nil)
	if err != nil {
		return nil, err
	}
	return m.Transport(), nil
}

// movesTimeout bounds the question to each other member about its moves.
const movesTimeout = 2 * time.Second

// memberMoves is what one member said of the partitions moving from it,
// or why it could not be asked.
type memberMoves struct {
	ID    string
	URL   string
	Moves []api.MoveStatus
	Err   error
}

// fetchMoves asks every other member that is UP (at its public url, else
// its url) for its moves: a node lists only the partitions moving from
// itself. A member that does not answer within timeout is reported, never
// fatal. The answers come in member order.
func fetchMoves(ctx context.Context, hc *http.Client, st client.ClusterStatus, token string, timeout time.Duration) []memberMoves {
	var out []memberMoves
	for _, m := range st.Members {
		if m.Self || m.State != "UP" || m.ID == st.Node {
			continue
		}
		u := m.PublicURL
		if u == "" {
			u = m.URL
		}
		out = append(out, memberMoves{ID: m.ID, URL: strings.TrimRight(u, "/")})
	}
	sort.SliceStable(out, func(i, j int) bool { return wording.NaturalLess(out[i].ID, out[j].ID) })
	var wg sync.WaitGroup
	for i := range out {
		a := &out[i]
		if a.URL == "" {
			a.Err = errors.New("no url known")
			continue
		}
		wg.Go(func() {
			actx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			other, err := client.New(a.URL, token, client.WithHTTPClient(hc)).Cluster(actx)
			a.Moves, a.Err = other.Moves, err
		})
	}
	wg.Wait()
	return out
}

// shortFetchError says in a few words why a member did not answer.
func shortFetchError(err error, timeout time.Duration) string {
	var he *client.HTTPError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("no answer within %s", timeout)
	case errors.As(err, &he):
		return he.Error()
	default:
		return err.Error()
	}
}

// statusTarget is the node `shoal status` asks, with what helps when it
// does not answer.
type statusTarget struct {
	url    string
	others []string // the other peers' urls in the dev directory's peer list
	note   string   // why the dev directory's peer list did not give the url
}

// statusURL picks the node to ask: --url, else $SHOAL_URL, else the first
// peer of DIR/peers.json, else the default.
func statusURL(flagURL, dir string) statusTarget {
	var t statusTarget
	path := filepath.Join(dir, "peers.json")
	var peers []string
	if data, err := os.ReadFile(path); err == nil {
		if peers = peerURLsInFileOrder(data); len(peers) == 0 {
			t.note = path + " names no node (is it valid JSON?)"
		}
	}
	t.url = flagURL
	if t.url == "" {
		t.url = os.Getenv("SHOAL_URL")
	}
	if t.url == "" && len(peers) > 0 {
		t.url = peers[0]
	}
	if t.url == "" {
		t.url = defaultNodeURL
	}
	t.url = strings.TrimRight(t.url, "/")
	for _, p := range peers {
		if p != t.url {
			t.others = append(t.others, p)
		}
	}
	return t
}

// peerURLsInFileOrder lists the peers' urls as the file lists them. A list
// the node would refuse still names its nodes, so it is read leniently here:
// status is how one finds out why the node refused it.
func peerURLsInFileOrder(data []byte) []string {
	var doc struct {
		Peers []struct {
			URL          string `json:"url"`
			PublicDomain string `json:"public_domain"`
		} `json:"peers"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return nil
	}
	var urls []string
	for _, p := range doc.Peers {
		switch {
		case p.URL != "":
			urls = append(urls, strings.TrimRight(p.URL, "/"))
		case p.PublicDomain != "":
			urls = append(urls, "http://"+p.PublicDomain)
		}
	}
	return urls
}

// statusToken picks the token and says where it came from, for error messages.
func statusToken(flagToken, dir string) (token, from string) {
	if flagToken != "" {
		return flagToken, "--token"
	}
	if t := os.Getenv("SHOAL_TOKEN"); t != "" {
		return t, "$SHOAL_TOKEN"
	}
	path := filepath.Join(dir, "admin.token")
	if data, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(data)); t != "" {
			return t, path
		}
	}
	return "", ""
}

// explainStatusError turns a failure into one line that says what to do.
func explainStatusError(err error, t statusTarget, tokenFrom string) string {
	target := t.url
	var he *client.HTTPError
	var ae *client.AnswerError
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		hint := "start a cluster with `shoal dev`, or point --url (or $SHOAL_URL) at a running node"
		switch {
		case len(t.others) > 0:
			hint = "that node is down; try another with --url " + strings.Join(t.others, " or --url ")
		case t.note != "":
			hint = t.note + "; pass --url"
		}
		return fmt.Sprintf("no node answers at %s (connection refused): %s", target, hint)
	case errors.As(err, &he) && he.StatusCode == http.StatusUnauthorized:
		if tokenFrom == "" {
			return fmt.Sprintf("%s wants a token (401) and none was given: pass --token, set $SHOAL_TOKEN, "+
				"or use --dir with the directory of `shoal dev` (it writes admin.token); mint one with `shoal token --admin`", target)
		}
		return fmt.Sprintf("%s refused the token from %s (401: %s): mint an admin token with the cluster's AUTH_SECRET "+
			"(`shoal token --admin`), or restart `shoal dev` to refresh its admin.token", target, tokenFrom, he.Message())
	case errors.As(err, &he) && he.StatusCode == http.StatusForbidden:
		return fmt.Sprintf("%s says the token from %s may not see the cluster (403): it needs an admin token; mint one with `shoal token --admin`", target, tokenFrom)
	case errors.As(err, &he) && he.StatusCode == http.StatusNotFound:
		return fmt.Sprintf("%s has no /v1/cluster (404): it is not a Shoal node, or one built before clustering; check --url", target)
	case errors.As(err, &he):
		return fmt.Sprintf("%s answered GET /v1/cluster with %s: check the node's log and try again", target, he.Answer())
	case errors.As(err, &ae):
		return fmt.Sprintf("%s answered with something that is not Shoal's cluster status (%v): is --url a Shoal node's base URL?", target, err)
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("cannot resolve the host of %s (%v): check --url", target, err)
	case errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("%s did not answer within 10s: is the node overloaded, or is --url the wrong address?", target)
	default:
		return fmt.Sprintf("asking %s failed: %v; check --url", target, err)
	}
}

// statusWidth is the width the output keeps to (but for long urls).
const statusWidth = 100

// renderStatus renders the cluster status for a person: a header saying
// which node answered and about its peer list, one row per member, then
// the partitions moving, from the answering node's answer and others'.
func renderStatus(st client.ClusterStatus, others []memberMoves, from string, now time.Time) string {
	var b strings.Builder
	version := ""
	if st.Version != "" {
		version = " (version " + st.Version + ")"
	}
	fmt.Fprintf(&b, "Cluster as %s sees it%s, asked at %s\n", wording.OrDash(st.Node), version, from)
	pl := st.PeerList
	loaded := "never loaded"
	if pl.LoadedAt != nil && !pl.LoadedAt.IsZero() {
		loaded = "loaded " + pl.LoadedAt.UTC().Format(time.RFC3339) + " (" + ago(now.Sub(*pl.LoadedAt)) + ")"
	}
	fmt.Fprintf(&b, "Peer list: %s, %s, %s\n", wording.OrDash(pl.Source), wording.Plural(pl.Peers, "peer"), loaded)
	if r := pl.Refusal; r != nil {
		fmt.Fprintf(&b, "!!! PEER LIST REFUSED at %s (%s): %s\n", r.At.UTC().Format(time.RFC3339), ago(now.Sub(r.At)), r.Reason)
		fmt.Fprintf(&b, "!!! %s keeps the list it loaded before; fix %s and it is read again at the next refresh\n", wording.OrDash(st.Node), wording.OrDash(pl.Source))
	}
	members := append([]cluster.MemberStatus(nil), st.Members...)
	sort.SliceStable(members, func(i, j int) bool { return wording.NaturalLess(members[i].ID, members[j].ID) })
	counts := map[string]int{}
	listings := map[string]int{}
	for _, m := range members {
		counts[string(m.State)]++
		listings[listing(st, m)]++
	}
	var states []string
	for _, s := range []string{"UP", "SUSPECT", "DOWN"} {
		if counts[s] > 0 {
			states = append(states, fmt.Sprintf("%d %s", counts[s], s))
			delete(counts, s)
		}
	}
	for s, n := range counts {
		states = append(states, fmt.Sprintf("%d %s", n, wording.OrDash(s)))
	}
	summary := wording.Plural(len(members), "member")
	if len(states) > 0 {
		summary += ": " + strings.Join(states, ", ")
	}
	var out []string
	for _, l := range []string{outDraining, outRemoved} {
		if n := listings[l]; n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, l))
		}
	}
	if n := listings[outUnknown]; n > 0 {
		out = append(out, fmt.Sprintf("%d unknown (gossiping but not in the peer list)", n))
	}
	if len(out) > 0 {
		summary += "; " + strings.Join(out, ", ")
	}
	fmt.Fprintf(&b, "%s\n", summary)
	if ps := st.Partitions; ps != nil {
		line := wording.Plural(ps.Count, "partition")
		if ps.WithoutMaster > 0 {
			line += fmt.Sprintf(", %d WITHOUT A MASTER (writes to them get 503 until one is elected)", ps.WithoutMaster)
		} else {
			line += ", every one with a master"
		}
		fmt.Fprintf(&b, "%s\n", line)
	}
	if v := st.Voters; v != nil {
		fmt.Fprintf(&b, "Lease voters: %s\n", strings.Join(v.Current, ", "))
		if v.Changing {
			fmt.Fprintf(&b, "Voter change in progress, one member at a time: heading for %s\n", strings.Join(v.Target, ", "))
		}
	}
	for _, m := range members {
		ps := st.Partitions
		switch listing(st, m) {
		case outDraining:
			unchecked := ""
			if n := ps.Unreconciled[m.ID]; n > 0 {
				unchecked = fmt.Sprintf(", holds writes of its own no later master has checked in %s", wording.Plural(n, "partition"))
			}
			fmt.Fprintf(&b, "%s drains (out of the peer list): masters %s, holds %s%s; do not stop it yet\n",
				m.ID, wording.Plural(ps.Masters[m.ID], "partition"), wording.Copies(ps.Copies[m.ID]), unchecked)
		case outRemoved:
			fmt.Fprintf(&b, "%s is out of the peer list and holds nothing: safe to stop (its data stays on disk)\n", m.ID)
		}
	}
	fmt.Fprintln(&b)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	header := "  ID\tSTATE\tURL\tFREE\tLAST HEARD\tROLES"
	if st.Partitions != nil {
		header += "\tMASTERS\tCOPIES"
	}
	fmt.Fprintln(tw, header)
	for _, m := range members {
		id := "  " + m.ID
		if m.Self {
			id = "* " + m.ID
		}
		if l := listing(st, m); l != inList {
			id += " (" + l + ")"
		}
		u := m.URL
		if m.PublicURL != "" && m.PublicURL != m.URL {
			if u == "" {
				u = m.PublicURL
			} else {
				u += " (public " + m.PublicURL + ")"
			}
		}
		free := "-"
		if m.FreeBytes != nil {
			free = humanBytes(int64(*m.FreeBytes))
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", id, wording.OrDash(string(m.State)), wording.OrDash(u), free,
			lastHeard(m, now), wording.Roles(m.Sharding, m.Replica, m.Voter))
		if ps := st.Partitions; ps != nil {
			row += fmt.Sprintf("\t%d\t%d", ps.Masters[m.ID], ps.Copies[m.ID])
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	fmt.Fprintln(&b)
	legend := []string{"* this node", "ROLES: S sharding, R replica, V voter"}
	if st.Partitions != nil {
		legend = append(legend, "MASTERS: partitions it masters", "COPIES: partitions it holds a copy of as a replica")
	}
	if listings[outDraining] > 0 {
		legend = append(legend, "draining: out of the peer list, hands over what it holds")
	}
	if listings[outRemoved] > 0 {
		legend = append(legend, "removed: out of the peer list, holds nothing")
	}
	if listings[outUnknown] > 0 {
		legend = append(legend, "unknown: gossips with the cluster but is not in the peer list")
	}
	for _, line := range wrapItems(legend, "; ", statusWidth) {
		fmt.Fprintln(&b, line)
	}
	fmt.Fprintln(&b)
	renderMoves(&b, st, others)
	return b.String()
}

// renderMoves lists the partitions moving, as the answering node and the
// other members said, and the members that could not be asked.
func renderMoves(b *strings.Builder, st client.ClusterStatus, others []memberMoves) {
	moves := slices.Clone(st.Moves)
	var failed []memberMoves
	for _, o := range others {
		if o.Err != nil {
			failed = append(failed, o)
			continue
		}
		moves = append(moves, o.Moves...)
	}
	sort.SliceStable(moves, func(i, j int) bool {
		if moves[i].Partition != moves[j].Partition {
			return moves[i].Partition < moves[j].Partition
		}
		return wording.NaturalLess(moves[i].From, moves[j].From)
	})
	switch {
	case len(moves) == 0 && len(failed) == 0:
		fmt.Fprintln(b, "No partition is moving.")
	case len(moves) == 0:
		fmt.Fprintln(b, "No partition is moving, as far as the members that answered say.")
	default:
		fmt.Fprintf(b, "Moves in progress (%s):\n", wording.Plural(len(moves), "partition"))
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  PARTITION\tFROM\tTO\tPHASE\tCOPIED\tBEHIND")
		for _, m := range moves {
			copied := strconv.FormatInt(m.DocumentsCopied, 10)
			if m.DocumentsTotal > 0 {
				copied += "/" + strconv.FormatInt(m.DocumentsTotal, 10)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%d\n", m.Partition, wording.OrDash(m.From), wording.OrDash(m.To), wording.OrDash(m.Phase), copied, m.Behind)
		}
		tw.Flush()
		fmt.Fprintln(b, "COPIED: documents copied to the new master (of all to copy); BEHIND: changes it still lacks")
	}
	for _, f := range failed {
		fmt.Fprintf(b, "! could not ask %s at %s for its moves: %s\n", f.ID, wording.OrDash(f.URL), shortFetchError(f.Err, movesTimeout))
	}
}

// wrapItems joins items with sep into lines of at most width characters
// (an item longer than width gets a line of its own).
func wrapItems(items []string, sep string, width int) []string {
	var lines []string
	line := ""
	for _, it := range items {
		switch {
		case line == "":
			line = it
		case len(line)+len(sep)+len(it) <= width:
			line += sep + it
		default:
			lines = append(lines, line+strings.TrimRight(sep, " "))
			line = it
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

func lastHeard(m cluster.MemberStatus, now time.Time) string {
	switch {
	case m.LastHeardMsAgo != nil:
		return ago(time.Duration(*m.LastHeardMsAgo) * time.Millisecond)
	case m.LastHeard != nil && !m.LastHeard.IsZero():
		return ago(now.Sub(*m.LastHeard))
	default:
		return "never"
	}
}

// ago says how long ago something happened: "0.4s ago", "3m12s ago".
func ago(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1fs ago", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds ago", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm ago", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
	}
}

// humanBytes prints a byte count in binary units: 38.2 GiB.
func humanBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n) / 1024
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v >= 1023.95 && i < len(units)-1 { // would print as 1024.0
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// fileExists reports whether path names a file that can be stat'ed.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
