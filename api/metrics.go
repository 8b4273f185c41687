package api

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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
			Name: "shoal_store_operation_duration_seconds", Help: "Time of operations on the node's MongoDB, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}, []string{"op"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_store_operation_errors_total", Help: "Failed operations on the node's MongoDB, by operation.",
		}, []string{"op"}),
		commitChanges: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shoal_commit_batch_changes", Help: "Document changes per group commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}),
		commitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "shoal_commit_duration_seconds", Help: "Time from starting a group commit to its end.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}),
	}
	m.Registry.MustRegister(m.requests, m.requestDuration, m.storeDuration, m.storeErrors, m.commitChanges, m.commitDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveStore records one store operation (store.Options.Observe).
func (m *Metrics) ObserveStore(op string, d time.Duration, err error) {
	m.storeDuration.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		m.storeErrors.WithLabelValues(op).Inc()
	}
}

// ObserveCommit records one group commit (store.WriterOptions.ObserveBatch).
func (m *Metrics) ObserveCommit(changes int, d time.Duration) {
	m.commitChanges.Observe(float64(changes))
	m.commitDuration.Observe(d.Seconds())
}
