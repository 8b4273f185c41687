package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
)

// chromium finds Debian's chromium on PATH, or skips the test saying what
// is missing.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("SKIPPED: the dashboard's browser test needs a browser and chromium not found on PATH (chromium, chromium-browser): " +
		"apt-get install -y chromium (Debian's package; .ci/run installs it when apt-get works)")
	return ""
}

// browserPage is one headless chromium tab.
type browserPage struct {
	t     *testing.T
	ctx   context.Context
	shots string
	n     int
	start time.Time
}

// openBrowser starts chromium and opens a tab. Screenshots go to
// $SHOAL_UI_SCREENSHOTS, else to a directory under t.TempDir().
func openBrowser(t *testing.T, path string) *browserPage {
	shots := os.Getenv("SHOAL_UI_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join(t.TempDir(), "screenshots")
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s (set SHOAL_UI_SCREENSHOTS to keep them after the test)", shots)
	// Chromium's own temporary files (its profile's singleton socket
	// directory) go under the test's directory, removed with it: in /tmp
	// each run left one behind.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1500, 1900),
		chromedp.Env("TMPDIR="+t.TempDir()))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	p := &browserPage{t: t, ctx: ctx, shots: shots, start: time.Now()}
	// The first Run starts the browser; it must not have a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			p.screenshot("failure")
		}
	})
	return p
}

// do runs browser actions, each within 15 s.
func (p *browserPage) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.screenshot("failed-" + strings.ReplaceAll(what, " ", "-"))
		p.t.Fatalf("%s: %v", what, err)
	}
}

func (p *browserPage) screenshot(name string) {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	p.n++
	file := filepath.Join(p.shots, fmt.Sprintf("%02d-%s.png", p.n, name))
	if err := os.WriteFile(file, png, 0o644); err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	p.t.Logf("screenshot %s (%s into the browser's life)", file, time.Since(p.start).Round(time.Millisecond))
}

// pageState is what the page shows, as a person would read it.
type pageState struct {
	Members    map[string]string `json:"members"` // id -> the state's text
	Moves      []shownMove       `json:"moves"`
	Masters    map[string]string `json:"masters"` // partition -> data-master ("?": not known)
	Epochs     map[string]string `json:"epochs"`  // partition -> data-epoch ("": not known)
	DoneMaster map[string]string `json:"done"`    // partition -> the text of a move no longer listed
	Moved      []shownMove       `json:"moved"`   // the bars of moves no longer listed
	BannerDown string            `json:"bannerDown"`
	BannerAuth string            `json:"bannerAuth"`
	RingError  string            `json:"ringError"`
	Docs       []string          `json:"docs"`
	Collection map[string]string `json:"collections"`
	DocError   string            `json:"docError"`
	NextOn     bool              `json:"nextOn"`
	Detail     map[string]string `json:"detail"`
}

// barOf is the bar of partition part among bars, or nil.
func barOf(bars []shownMove, part string) *shownMove {
	for i := range bars {
		if bars[i].Partition == part {
			return &bars[i]
		}
	}
	return nil
}

type shownMove struct {
	Partition string  `json:"partition"`
	Now       *string `json:"now"` // aria-valuenow (absent: indeterminate)
	Text      string  `json:"text"`
	Label     string  `json:"label"` // aria-label
}

const readPage = `(() => {
  const all = (s) => [...document.querySelectorAll(s)];
  const shown = (id) => { const e = document.querySelector('[data-testid="' + id + '"]'); return e && !e.hidden ? e.textContent : ""; };
  const out = {members: {}, moves: [], moved: [], masters: {}, epochs: {}, done: {}, docs: [], collections: {}, detail: {},
    bannerDown: shown("banner-down"), bannerAuth: shown("banner-auth"), ringError: shown("ring-error"), docError: shown("doc-error"),
    nextOn: !document.querySelector('[data-testid="doc-next"]').disabled};
  for (const r of all('tr[data-testid^="member-"]')) {
    const id = r.dataset.testid.slice("member-".length);
    out.members[id] = r.querySelector('[data-testid="member-' + id + '-state"]').textContent;
  }
  for (const b of all('[role="progressbar"][data-testid^="move-"]')) {
    out.moves.push({partition: b.dataset.testid.slice("move-".length), now: b.getAttribute("aria-valuenow"), text: b.getAttribute("aria-valuetext"), label: b.getAttribute("aria-label")});
  }
  for (const b of all('[role="progressbar"][data-testid^="moved-"]')) {
    out.moved.push({partition: b.dataset.testid.slice("moved-".length), now: b.getAttribute("aria-valuenow"), text: b.getAttribute("aria-valuetext")});
  }
  for (const p of all('#ring [data-testid^="partition-"]')) {
    out.masters[p.dataset.partition] = p.dataset.master;
    out.epochs[p.dataset.partition] = p.dataset.epoch;
  }
  for (const d of all('[data-testid^="move-done-master-"]')) out.done[d.dataset.testid.slice("move-done-master-".length)] = d.textContent;
  for (const d of all('#doc-results [data-testid^="doc-"]')) out.docs.push(d.dataset.testid.slice(4));
  for (const c of all('#collections [data-testid^="coll-"]')) out.collections[c.dataset.testid.slice(5)] = c.textContent;
  for (const d of all('#partition-detail [data-testid^="detail-"]')) out.detail[d.dataset.testid.slice(7)] = d.textContent;
  return out;
})()`

func (p *browserPage) read() pageState {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](readPage))
	if err != nil {
		p.t.Fatalf("reading the page: %v", err)
	}
	return s
}

// until waits for cond on what the page shows.
func (p *browserPage) until(timeout time.Duration, what string, cond func(s pageState) (bool, string)) pageState {
	p.t.Helper()
	var last pageState
	defer func() {
		if p.t.Failed() {
			js, _ := json.Marshal(last)
			p.t.Logf("the page showed: %s", js)
		}
	}()
	testnode.Eventually(p.t, timeout, what, func() (bool, string) {
		last = p.read()
		return cond(last)
	})
	return last
}

func (p *browserPage) setToken(token string) {
	p.t.Helper()
	p.do("paste a token", chromedp.SendKeys(chromedp.CSS(`[data-testid="token-input"]`), token), chromedp.Click(chromedp.CSS(`[data-testid="token-save"]`)))
}

// TestDashboardInABrowser drives the dashboard of a three-node cluster in
// headless chromium: the token, the members' states, a move to a fourth
// node with its progress bar, the ring after it, the document browser, a
// node that stops and the node of the page that stops.
func TestDashboardInABrowser(t *testing.T) {
	path := chromium(t)
	start := time.Now()
	c := testcluster.Start(t, 3, testcluster.ReplicationBatch(5))
	t.Logf("cluster of 3 ready in %s", time.Since(start).Round(time.Millisecond))
	admin := testnode.AdminToken(t)
	p := openBrowser(t, path)
	home := c.Nodes[0]

	// /ui redirects to /ui/; without a token the page asks for one.
	p.do("open the dashboard", chromedp.Navigate(home.URL()+"/ui"))
	p.until(10*time.Second, "the page asks for a token", func(s pageState) (bool, string) {
		return strings.Contains(s.BannerAuth, "Paste an admin token"), s.BannerAuth
	})
	// A user's token is refused (403) and the page says so.
	p.setToken(testnode.Token(t, "alice"))
	p.until(10*time.Second, "the page says a user's token is not an admin token", func(s pageState) (bool, string) {
		return strings.Contains(s.BannerAuth, "not an admin token") && strings.Contains(s.BannerAuth, "Paste an admin token"), s.BannerAuth
	})

	p.setToken(admin)
	p.until(10*time.Second, "three members UP", func(s pageState) (bool, string) {
		for _, id := range []string{"node1", "node2", "node3"} {
			if s.Members[id] != "UP" {
				return false, fmt.Sprintf("members %v", s.Members)
			}
		}
		return s.BannerAuth == "", fmt.Sprintf("members %v, banner %q", s.Members, s.BannerAuth)
	})

	// The ring shows every partition with the master and epoch the page's
	// node names for it (its placement), from its partition table.
	p.until(10*time.Second, "every partition on the ring with the master and epoch node1 names", func(s pageState) (bool, string) {
		return ringAsSeenBy(home, s)
	})
	// The document browser finds documents written through the API.
	writer := c.Nodes[1].Client(admin)
	for i, stars := range []int{1, 3, 5} {
		id := fmt.Sprintf("n%d", i+1)
		if r := writer.Do("PUT", "/v1/users/uiuser/collections/notes/documents/"+id, fmt.Sprintf(`{"title":"note %d","stars":%d}`, i+1, stars)); r.Status != 201 {
			t.Fatalf("PUT %s: %d %s", id, r.Status, r.Body)
		}
	}
	p.do("list uiuser's collections", chromedp.SendKeys(chromedp.CSS(`[data-testid="doc-user"]`), "uiuser"),
		chromedp.Click(chromedp.CSS(`[data-testid="doc-list"]`)))
	p.until(10*time.Second, "the collection notes with 3 documents", func(s pageState) (bool, string) {
		return s.Collection["notes"] == "notes (3)", fmt.Sprintf("collections %v, error %q", s.Collection, s.DocError)
	})
	p.do("query notes with stars >= 3, one a page", chromedp.SetValue(chromedp.CSS(`[data-testid="doc-filter"]`), `{"stars":{"$gte":3}}`),
		chromedp.SetValue(chromedp.CSS(`[data-testid="doc-limit"]`), "1"),
		chromedp.Click(chromedp.CSS(`[data-testid="coll-notes"]`)))
	p.until(10*time.Second, "the first page: n2", func(s pageState) (bool, string) {
		return slices.Equal(s.Docs, []string{"n2"}) && s.NextOn, fmt.Sprintf("docs %v, next %v, error %q", s.Docs, s.NextOn, s.DocError)
	})
	p.do("next page", chromedp.Click(chromedp.CSS(`[data-testid="doc-next"]`)))
	p.until(10*time.Second, "the second page: n3", func(s pageState) (bool, string) {
		return slices.Equal(s.Docs, []string{"n3"}), fmt.Sprintf("docs %v, next %v, error %q", s.Docs, s.NextOn, s.DocError)
	})
	text, err := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS(`[data-testid="doc-n3"]`)))
	if err != nil || !strings.Contains(text, `"title": "note 3"`) || !strings.Contains(text, `"_version": 1`) {
		t.Errorf("document n3 shows %q (%v), want its JSON", text, err)
	}
	p.do("a filter the API refuses", chromedp.SetValue(chromedp.CSS(`[data-testid="doc-filter"]`), `{"$where":"1"}`),
		chromedp.Click(chromedp.CSS(`[data-testid="doc-query"]`)))
	p.until(10*time.Second, "the API's refusal shown", func(s pageState) (bool, string) {
		return strings.Contains(s.DocError, "400"), s.DocError
	})

	// The ring: every partition asked, mastered as the cluster says.
	p.until(15*time.Second, "every partition on the ring with its master", func(s pageState) (bool, string) {
		return ringMatches(c, s)
	})
	p.screenshot("three-up")
	// One request a poll draws it: GET /v1/cluster with the partition
	// table, and no placement asked.
	asked, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`performance.getEntriesByType("resource").map((e) => e.name)`))
	if err != nil {
		t.Fatal(err)
	}
	polls := 0
	for _, u := range asked {
		switch {
		case strings.Contains(u, "/placement"):
			t.Errorf("the page asked %s", u)
		case strings.Contains(u, "/v1/cluster?"):
			if !strings.HasSuffix(u, "/v1/cluster?all=1&partitions=1&moves=all") {
				t.Errorf("the page asked %s, want /v1/cluster?all=1&partitions=1&moves=all", u)
			}
			polls++
		}
	}
	if polls < 2 {
		t.Errorf("the page asked GET /v1/cluster %d times in %s: %v", polls, time.Since(p.start).Round(time.Second), asked)
	}

	// A move: a partition node1 masters whose preferred master node4 will
	// be, filled so that its copy takes a moment. Node-to-node calls
	// between node4 and every other node are cut while node4 joins, so
	// that every move waits in its copy, listed, for as long as the page
	// needs to show it; then the cuts heal and the copies run. The page,
	// node1's, shows the moves from node2 and node3 too.
	part, user, toNode4 := movingPartitionOf(t, c, "node1")
	took := testcluster.FillUser(t, home.Client(admin), user, 1500, 256)
	t.Logf("1500 documents written to %s in %s", user, took.Round(time.Millisecond))
	for _, id := range []string{"node1", "node2", "node3"} {
		c.Faults.CutCalls(id, "node4")
	}
	added := time.Now()
	c.AddNode()
	seen := map[string]string{}  // partition -> the highest aria-valuenow shown ("" : no count yet)
	sources := map[string]bool{} // the nodes the moves shown go from
	watch := func(s pageState) {
		for _, m := range s.Moves {
			now := ""
			if m.Now != nil {
				now = *m.Now
			}
			if prev, ok := seen[m.Partition]; !ok || atoi(now) > atoi(prev) {
				seen[m.Partition] = now
			}
			if from, _, ok := strings.Cut(strings.TrimPrefix(m.Label, "partition "+m.Partition+" moving from "), " to "); ok {
				sources[from] = true
			}
		}
	}
	p.until(20*time.Second, fmt.Sprintf("the move of partition %d to node4, and moves from node2 and node3, shown with a progress bar", part), func(s pageState) (bool, string) {
		watch(s)
		_, ok := seen[fmt.Sprint(part)]
		return ok && sources["node2"] && sources["node3"], fmt.Sprintf("moves shown: %v", s.Moves)
	})
	p.screenshot("moving")
	c.Faults.HealAll()
	p.until(30*time.Second, "no move left, and node4's partitions shown mastered by node4", func(s pageState) (bool, string) {
		watch(s)
		if len(s.Moves) > 0 {
			return false, fmt.Sprintf("%d moves listed: %v", len(s.Moves), s.Moves)
		}
		// Every move the page showed is now shown gone, the partition
		// mastered by node4, its progress bar full.
		for part := range seen {
			if !strings.Contains(s.DoneMaster[part], "master now node4") {
				return false, fmt.Sprintf("partition %s moved, shown as %q", part, s.DoneMaster[part])
			}
			if bar := barOf(s.Moved, part); bar == nil || bar.Now == nil || *bar.Now != "100" || !strings.Contains(bar.Text, "node4 masters it") {
				return false, fmt.Sprintf("partition %s moved, its bar shown as %+v", part, bar)
			}
		}
		// Every partition node4 is the preferred master of is shown
		// mastered by node4, and the whole ring as it is.
		for _, part := range toNode4 {
			if got := s.Masters[fmt.Sprint(part)]; got != "node4" {
				return false, fmt.Sprintf("partition %d shown mastered by %q", part, got)
			}
		}
		return ringMatches(c, s)
	})
	t.Logf("moves shown (partition: highest copy percentage shown): %v; all done %s after the peer list edit", seen, time.Since(added).Round(time.Millisecond))
	p.screenshot("after-move")

	// A partition's details: its master, epoch, preferred master,
	// responsible list (every member UP) and node1's position, as node1's
	// placement gives them.
	p.do("click the filled partition", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-testid="partition-%d"]`, part))))
	p.until(10*time.Second, "the partition's details", func(s pageState) (bool, string) {
		want := home.Placement(part)
		var responsible []string
		for _, id := range want.Responsible {
			responsible = append(responsible, id+" (UP)")
		}
		position := "- (node1 holds no copy)"
		if want.Master == home.ID || slices.Contains(want.Responsible, home.ID) {
			at := home.Applied(part)
			position = fmt.Sprintf("%d/%d", at.Epoch, at.Seq)
		}
		ok := want.Master == "node4" && s.Detail["partition"] == fmt.Sprint(part) && s.Detail["master"] == "node4 (UP)" &&
			s.Detail["epoch"] == fmt.Sprint(want.Epoch) && s.Detail["preferred"] == "node4" && want.PreferredMaster == "node4" &&
			s.Detail["responsible"] == strings.Join(responsible, ", ") && s.Detail["position"] == position
		return ok, fmt.Sprintf("shown %v; node1 says master %s epoch %d preferred %s responsible %v position %s",
			s.Detail, want.Master, want.Epoch, want.PreferredMaster, want.Responsible, position)
	})

	// A node that stops turns DOWN.
	c.Node("node3").Stop()
	p.until(20*time.Second, "node3 DOWN", func(s pageState) (bool, string) {
		return s.Members["node3"] == "DOWN", fmt.Sprintf("members %v", s.Members)
	})
	p.screenshot("node3-down")

	// The page's own node stops: the banner says since when.
	home.Stop()
	p.until(15*time.Second, "the banner that the node does not answer", func(s pageState) (bool, string) {
		return strings.HasPrefix(s.BannerDown, "node not answering since "), s.BannerDown
	})
	p.screenshot("node1-stopped")
	t.Logf("whole test %s", time.Since(start).Round(time.Millisecond))
}

func atoi(s string) int {
	n := -1
	fmt.Sscan(s, &n)
	return n
}

// ringMatches says whether the ring shows every partition mastered by
// the node that holds its lease now.
func ringMatches(c *testcluster.Cluster, s pageState) (bool, string) {
	return ringShows(s, func(part int, master, _ string) string {
		if want := c.MasterOf(part); master != want {
			return fmt.Sprintf("shown %q, held by %q", master, want)
		}
		return ""
	})
}

// ringAsSeenBy says whether the ring shows every partition with the
// master and epoch n's placement names.
func ringAsSeenBy(n *testcluster.Node, s pageState) (bool, string) {
	return ringShows(s, func(part int, master, epoch string) string {
		if want := n.Placement(part); master != want.Master || epoch != fmt.Sprint(want.Epoch) {
			return fmt.Sprintf("shown %q at epoch %q, %s names %q at %d", master, epoch, n.ID, want.Master, want.Epoch)
		}
		return ""
	})
}

// ringShows checks that the ring shows every partition, each as wrong
// (which returns "" when the partition's master and epoch are right, else
// what is wrong) accepts.
func ringShows(s pageState, wrong func(part int, master, epoch string) string) (bool, string) {
	if s.RingError != "" {
		return false, "ring error: " + s.RingError
	}
	if len(s.Masters) != testcluster.Partitions {
		return false, fmt.Sprintf("%d partitions on the ring", len(s.Masters))
	}
	var bad []string
	for part := 0; part < testcluster.Partitions; part++ {
		if w := wrong(part, s.Masters[fmt.Sprint(part)], s.Epochs[fmt.Sprint(part)]); w != "" {
			bad = append(bad, fmt.Sprintf("%d: %s", part, w))
		}
	}
	return len(bad) == 0, strings.Join(bad, "; ")
}

// movingPartitionOf finds a partition that from masters and whose
// preferred master a fourth node would be, and a user placed in it; and
// every partition whose preferred master the fourth node would be.
func movingPartitionOf(t *testing.T, c *testcluster.Cluster, from string) (part int, user string, toNode4 []int) {
	toNode4 = testcluster.PreferredByANewNode(t)
	for i := 0; i < 100000; i++ {
		u := fmt.Sprintf("mover%d", i)
		if p := shard.PartitionOf(u, testcluster.Partitions); slices.Contains(toNode4, p) && c.MasterOf(p) == from {
			return p, u, toNode4
		}
	}
	t.Fatalf("no partition of %s moves to node4", from)
	return 0, "", nil
}
