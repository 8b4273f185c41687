package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shoal-db/shoal/cluster"
)

// clusterBench measures a running cluster: writes sent to a partition's
// master and to another node (forwarded), with write concern 1 and
// majority, and the replication lag from a write's acknowledgement to its
// visibility on the replica.
func clusterBench(o benchOptions, urls []string, lagWrites int, stdout, stderr io.Writer) int {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.clients * 2}, Timeout: 30 * time.Second}
	get := func(url string, v any, headers ...string) (int, http.Header, error) {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+o.token)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		if v != nil && resp.StatusCode == 200 {
			err = json.NewDecoder(resp.Body).Decode(v)
		} else {
			io.Copy(io.Discard, resp.Body)
		}
		return resp.StatusCode, resp.Header, err
	}
	// Where every node answers, and where the benchmark user's partition lives.
	var view cluster.View
	if code, _, err := get(urls[0]+"/v1/cluster", &view); err != nil || code != 200 {
		fmt.Fprintf(stderr, "shoal bench: %s/v1/cluster answered %d %v (is --token an admin token?)\n", urls[0], code, err)
		return 1
	}
	nodeURL := map[string]string{}
	for _, m := range view.Members {
		u := m.PublicURL
		if u == "" {
			u = m.URL
		}
		nodeURL[m.ID] = u
	}
	user := "bench-user-0"
	var pl struct {
		Master      string   `json:"master"`
		Responsible []string `json:"responsible"`
	}
	if code, _, err := get(urls[0]+"/v1/users/"+user+"/placement", &pl); err != nil || code != 200 || pl.Master == "" || len(pl.Responsible) < 2 {
		fmt.Fprintf(stderr, "shoal bench: the placement of %s is not settled (%d %v %+v); wait for the cluster to be ready\n", user, code, err, pl)
		return 1
	}
	master, replica := nodeURL[pl.Master], nodeURL[pl.Responsible[1]]
	// Forwarded writes go through a node that holds no copy if there is
	// one, else through the replica.
	other := replica
	for _, m := range view.Members {
		if !slices.Contains(pl.Responsible, m.ID) {
			other = nodeURL[m.ID]
			break
		}
	}
	fmt.Fprintf(stdout, "cluster of %d nodes; user %s: master %s (%s), replica %s; %d clients, %d-byte documents, %s per phase\n\n",
		len(nodeURL), user, pl.Master, master, pl.Responsible[1], o.clients, o.docBytes, o.duration)
	payload := strings.Repeat("x", o.docBytes)
	post := func(base, wc string) func(int) error {
		return func(c int) error {
			req, _ := http.NewRequest("POST", base+"/v1/users/"+user+"/collections/bench/documents", strings.NewReader(`{"payload":"`+payload+`"}`))
			req.Header.Set("Authorization", "Bearer "+o.token)
			req.Header.Set("X-Write-Concern", wc)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 201 {
				return fmt.Errorf("POST: status %d", resp.StatusCode)
			}
			return nil
		}
	}
	direct := runPhase(o, post(master, "1"))
	report(stdout, "writes to the master (1)", direct)
	forwarded := runPhase(o, post(other, "1"))
	report(stdout, "writes forwarded (1)", forwarded)
	majority := runPhase(o, post(master, "majority"))
	report(stdout, "writes majority", majority)
	fmt.Fprintf(stdout, "\nforwarded/direct %.2fx, majority/1 %.2fx\n\n", forwarded.rate()/direct.rate(), majority.rate()/direct.rate())

	// Replication lag: one write at a time to the master, then a local read
	// on the replica with the write's token until the replica has it.
	var lags []time.Duration
	start := time.Now()
	for i := 0; i < lagWrites; i++ {
		req, _ := http.NewRequest("POST", fmt.Sprintf("%s/v1/users/%s/collections/lag/documents", master, user), strings.NewReader(`{"i":1}`))
		req.Header.Set("Authorization", "Bearer "+o.token)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintf(stderr, "shoal bench: lag write: %v\n", err)
			return 1
		}
		var created struct {
			ID string `json:"_id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&created)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 201 {
			fmt.Fprintf(stderr, "shoal bench: lag write: status %d %v\n", resp.StatusCode, err)
			return 1
		}
		acked, token := time.Now(), resp.Header.Get("X-Consistency-Token")
		path := fmt.Sprintf("%s/v1/users/%s/collections/lag/documents/%s", replica, user, created.ID)
		for {
			code, _, err := get(path, nil, "X-Read-Preference", "local", "X-Consistency-Token", token)
			if err == nil && code == 200 {
				break
			}
			if time.Since(acked) > 10*time.Second {
				fmt.Fprintf(stderr, "shoal bench: write %d not visible on the replica after 10s (last %d %v)\n", i, code, err)
				return 1
			}
		}
		lags = append(lags, time.Since(acked))
	}
	slices.Sort(lags)
	pct := func(p float64) time.Duration { return lags[min(len(lags)-1, int(p*float64(len(lags))))] }
	fmt.Fprintf(stdout, "replication lag, ack on the master to visible on the replica (%d writes, %.0f/s): p50 %s  p99 %s  max %s\n",
		len(lags), float64(len(lags))/time.Since(start).Seconds(), roundDur(pct(0.5)), roundDur(pct(0.99)), roundDur(lags[len(lags)-1]))
	return exitFor(direct, forwarded, majority)
}

// clusterTargets resolves --urls and --token for --cluster, defaulting to a
// shoal dev directory.
func clusterTargets(urls, token, dir string) ([]string, string, error) {
	var list []string
	for _, u := range strings.Split(urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			list = append(list, strings.TrimRight(u, "/"))
		}
	}
	if len(list) == 0 {
		data, err := os.ReadFile(filepath.Join(dir, "peers.json"))
		if err != nil {
			return nil, "", errors.New("--cluster needs --urls, or a shoal dev directory (--dir) with peers.json")
		}
		pl, err := cluster.ParsePeerList(data, "")
		if err != nil {
			return nil, "", err
		}
		for _, p := range pl.Peers {
			list = append(list, p.URL)
		}
	}
	if token == "" {
		data, err := os.ReadFile(filepath.Join(dir, "admin.token"))
		if err != nil {
			return nil, "", errors.New("--cluster needs --token (an admin token), or a shoal dev directory with admin.token")
		}
		token = strings.TrimSpace(string(data))
	}
	return list, token, nil
}
