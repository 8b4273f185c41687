package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/replicate"
)

// Metrics are one node's Prometheus metrics, on a registry of their own so
// several nodes can live in one process (tests, benchmarks).
type Metrics struct {
	Registry        *prometheus.Registry
	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	storeDuration   *prometheus.HistogramVec
	storeErrors     *prometheus.CounterVec
	commitChanges   prometheus.Histogram
	commitDuration  prometheus.Histogram
	handoffs        *prometheus.CounterVec
	handoffPause    prometheus.Histogram
	copiedDocs      *prometheus.CounterVec
	copiedBytes     *prometheus.CounterVec
	purged          prometheus.Counter
	fullCopies      prometheus.Counter
	streamRequests  *prometheus.CounterVec
	strongReads     *prometheus.CounterVec
	majorityWait    prometheus.Histogram
	tenureMarkers   prometheus.Counter
}

// NewMetrics creates and registers the node's metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_http_requests_total", Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shoal_http_request_duration_seconds", Help: "Time to answer HTTP requests, by route pattern and method.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}, []string{"route", "method"}),
		storeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shoal_store_operation_duration_seconds", Help: "Time of operations on the node's store (Pebble or MongoDB), by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}, []string{"op"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_store_operation_errors_total", Help: "Failed operations on the node's store (Pebble or MongoDB), by operation; a lookup that finds nothing is not one.",
		}, []string{"op"}),
		commitChanges: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shoal_commit_batch_changes", Help: "Document changes per group commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}),
		commitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shoal_commit_duration_seconds", Help: "Time from starting a group commit to its end.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_partition_moves_total", Help: "Partitions this node handed to another master (an orderly handoff of the lease), by outcome (done, abandoned).",
		}, []string{"outcome"}),
		handoffPause: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shoal_partition_move_write_pause_seconds", Help: "How long writes to a partition paused during a handoff from this node.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		copiedDocs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_replication_copied_documents_total", Help: "Documents sent by catch-ups and full copies, by purpose: move (to a partition's next master) or replica.",
		}, []string{"purpose"}),
		copiedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_replication_copied_bytes_total", Help: "Approximate bytes of the documents sent by catch-ups and full copies, by purpose: move or replica.",
		}, []string{"purpose"}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shoal_tombstones_purged_total", Help: "Tombstones removed after TOMBSTONE_RETENTION.",
		}),
		fullCopies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shoal_replication_full_copies_total", Help: "Full copies of a partition started for a replica behind the tombstone horizon or awaiting one (every copy of a new store).",
		}),
		streamRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_replication_stream_requests_total", Help: "Replication requests this node took as a replica over replication streams, by outcome: applied (answered), refused (unusable: the stream is closed).",
		}, []string{"outcome"}),
		strongReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_strong_reads_total", Help: "Majority and linearizable reads this node's copy was asked to serve, by concern and outcome: served, not_committed (a replica that does not know the state to be majority-held), timeout (not majority-held in time), not_master (the lease lapsed or moved), unconfirmed (a new tenure not confirmed yet).",
		}, []string{"concern", "outcome"}),
		majorityWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shoal_strong_read_wait_seconds", Help: "How long majority and linearizable reads on the master waited for the state read to be majority-held.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}),
		tenureMarkers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shoal_tenure_markers_total", Help: "Tenure markers written: a new master's first write, made for a strong read.",
		}),
	}
	m.Registry.MustRegister(m.requests, m.requestDuration, m.storeDuration, m.storeErrors, m.commitChanges, m.commitDuration,
		m.handoffs, m.handoffPause, m.copiedDocs, m.copiedBytes, m.purged, m.fullCopies, m.streamRequests, m.strongReads, m.majorityWait, m.tenureMarkers,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// methodLabel is the method label of a request: the method when it is one
// the API knows, else "other", so that clients cannot add label values
// (each would be a new series on /metrics, kept until restart).
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// ObserveStore records one store operation (store.Options.Observe). A
// lookup that finds no document has not failed: every insert of a new
// document makes one.
func (m *Metrics) ObserveStore(op string, d time.Duration, err error) {
	m.storeDuration.WithLabelValues(op).Observe(d.Seconds())
	if err != nil && !errors.Is(err, record.ErrNotFound) {
		m.storeErrors.WithLabelValues(op).Inc()
	}
}

// ObserveCommit records one group commit (store.WriterOptions.ObserveBatch).
func (m *Metrics) ObserveCommit(changes int, d time.Duration) {
	m.commitChanges.Observe(float64(changes))
	m.commitDuration.Observe(d.Seconds())
}

// ObserveHandoff records a handoff: done (the lease was released to the
// receiver, writes paused for pause) or abandoned (writes resumed here).
func (m *Metrics) ObserveHandoff(pause time.Duration, done bool) {
	if !done {
		m.handoffs.WithLabelValues("abandoned").Inc()
		return
	}
	m.handoffs.WithLabelValues("done").Inc()
	m.handoffPause.Observe(pause.Seconds())
}

// observeStrongRead counts a majority or linearizable read by outcome.
func (m *Metrics) observeStrongRead(concern, outcome string) {
	m.strongReads.WithLabelValues(concern, outcome).Inc()
}

// ObserveCopied records a chunk of a catch-up or full copy; move says it
// went to the partition's next master.
func (m *Metrics) ObserveCopied(move bool, docs int, bytes int64) {
	purpose := "replica"
	if move {
		purpose = "move"
	}
	m.copiedDocs.WithLabelValues(purpose).Add(float64(docs))
	m.copiedBytes.WithLabelValues(purpose).Add(float64(bytes))
}

// ObservePurged records tombstones purged.
func (m *Metrics) ObservePurged(n int) { m.purged.Add(float64(n)) }

// ObserveFullCopy records a full copy started (replicate.Observer.FullCopyStarted).
func (m *Metrics) ObserveFullCopy(int) { m.fullCopies.Inc() }

// ReplicationCollector exports, at each scrape, how far each replica is
// behind on the partitions this node masters.
type ReplicationCollector struct {
	Lags   func() []replicate.Lag
	behind *prometheus.Desc
	catch  *prometheus.Desc
	lag    *prometheus.Desc
}

// NewReplicationCollector describes the replication metrics.
func NewReplicationCollector(lags func() []replicate.Lag) *ReplicationCollector {
	return &ReplicationCollector{Lags: lags,
		behind: prometheus.NewDesc("shoal_replication_behind_changes",
			"Changes a replica has not acknowledged yet, summed over the partitions this node masters.", []string{"replica"}, nil),
		catch: prometheus.NewDesc("shoal_replication_catching_up_partitions",
			"Partitions this node masters that a replica is being caught up on.", []string{"replica"}, nil),
		lag: prometheus.NewDesc("shoal_replication_lag_seconds",
			"Age of the oldest change a replica has not acknowledged, over the partitions this node masters.", []string{"replica"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *ReplicationCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.behind
	ch <- c.catch
	ch <- c.lag
}

// Collect implements prometheus.Collector.
func (c *ReplicationCollector) Collect(ch chan<- prometheus.Metric) {
	behind, catching, lag := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, l := range c.Lags() {
		behind[l.Replica] += float64(l.Behind)
		lag[l.Replica] = max(lag[l.Replica], float64(l.LagMs)/1000)
		if l.CatchUp {
			catching[l.Replica]++
		} else if _, ok := catching[l.Replica]; !ok {
			catching[l.Replica] = 0
		}
	}
	for r, v := range behind {
		ch <- prometheus.MustNewConstMetric(c.behind, prometheus.GaugeValue, v, r)
		ch <- prometheus.MustNewConstMetric(c.catch, prometheus.GaugeValue, catching[r], r)
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, lag[r], r)
	}
}
