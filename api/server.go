// Package api is Shoal's HTTP surface: the public REST API under /v1, the
// health and metrics endpoints, and (as the cluster grows) the routing of
// requests to the node responsible for them.
package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shoal-db/shoal/api/doc"
	"github.com/shoal-db/shoal/api/wire"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/logsafe"
	"github.com/shoal-db/shoal/internal/readall"
	"github.com/shoal-db/shoal/internal/ui"
	"github.com/shoal-db/shoal/lease"
	"github.com/shoal-db/shoal/replicate"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// Config is what the API needs to know about its node.
type Config struct {
	NodeID         string
	PartitionCount int
	MaxBodyBytes   int64
	// MaxDocumentBytes and MaxDocumentFields bound the document a write
	// stores (zero: no bound).
	MaxDocumentBytes  int64
	MaxDocumentFields int
	AuthSecret        []byte
	// TokenAudience is the aud every client token must carry (empty: not
	// checked); TokenMaxTTL the longest a token may be valid (zero:
	// DefaultTokenMaxTTL).
	TokenAudience string
	TokenMaxTTL   time.Duration
	// BodyReadTimeout bounds how long a request's body may take to arrive
	// (BODY_READ_TIMEOUT); WriteTimeout how long a client may leave each
	// part of an answer unread (WRITE_TIMEOUT). Zero: no bound.
	BodyReadTimeout time.Duration
	WriteTimeout    time.Duration
	// QueryBudget is the work one query may do, in query.Budget units
	// (0: query.DefaultBudget).
	QueryBudget int64
	// MaxPageBytes bounds the size of a query page (0: 4 MiB).
	MaxPageBytes int64
	// Now is the clock tokens are checked against (nil: time.Now); tests
	// pass a fake one.
	Now func() time.Time
	// Insecure treats every request as admin (development only).
	Insecure bool
	// Pprof serves Go's profiler at /debug/pprof/ to admin tokens.
	Pprof bool
	// NodeCertificates: /internal/ answers only requests that came with a
	// client certificate the TLS handshake verified against the CA
	// (TLS_CLIENT_AUTH=require), besides their signature.
	NodeCertificates bool
	Logger           *slog.Logger
	Metrics          *Metrics
	// Cluster is the node's membership (a cluster of one has no peers).
	Cluster *cluster.Cluster
	// Leases and Table route requests to partition masters; nil: every
	// request is served here.
	Leases Leases
	Table  *shard.Table
	// ReadTryTimeout bounds each try of a read that fails over.
	ReadTryTimeout time.Duration
	// Voter decides lease requests from other nodes (/internal/v1/lease).
	Voter Voter
	// Placement describes where a partition lives (/placement).
	Placement Placer
	// VoterSets reports the lease voter set in use and the one the peer
	// list asks for (/v1/cluster).
	VoterSets func() (current, target []string)
	// Committed is the newest position of a partition's history that this
	// node knows a majority of the partition's copies hold: as a replica,
	// what the master shipped with its batches (capped at what this copy
	// has applied); zero when unknown. Majority reads served by a replica
	// use it; nil: a replica serves no majority read (it answers 503 so
	// that the router tries the master).
	Committed func(partition int) store.Position
	// Replication waits for replicas' acknowledgements (write concerns);
	// nil: no replication (a cluster of one).
	Replication Replication
	// Copies is how many copies each partition should have: the
	// replication factor, or fewer when the cluster has fewer nodes that
	// can hold one. Write concerns count against it.
	Copies func() int
	// Counted, if set, returns those of replicas (the regular replicas of
	// a partition this node masters at epoch) whose acknowledgements count
	// for a write concern now (replicate.Mastership.Counted: not a copy a
	// swap is replacing); nil: all of them.
	Counted func(partition int, epoch uint64, replicas []string) []string
	// Handoffs are the orderly moves of partition leases from this node to
	// another, and this node's side of receiving one; nil: none.
	Handoffs Handoffs
	// Moves lists the partitions moving from this node (/v1/cluster).
	Moves func() []MoveStatus
	// Readiness says what the node still waits for before it takes
	// traffic (GET /readyz): nil, nothing beyond its start.
	Readiness func() Readiness
	// Unreconciled lists the partitions this node does not master whose
	// copy here holds writes of its own last tenure that no later master
	// has checked yet (/v1/cluster; see PartitionSummary.Unreconciled);
	// nil: none.
	Unreconciled func() []int
	// CheckCopy is a partition's master asked by node (the signer of
	// POST /internal/v1/check-copy) to check node's copy of partition:
	// node's copy may hold writes of an earlier tenure of its own that this
	// one never had, and is kept as an extra copy until it has answered a
	// batch of this tenure (which moves them to its rollback collection).
	// It returns this node's epoch, or an error if it is not the
	// partition's master. Nil: this node checks no copies.
	CheckCopy func(partition int, node string) (uint64, error)
	// Acknowledgements, if set, is told of every write this node
	// acknowledges as a partition's master (COMMIT_LOG).
	Acknowledgements Acknowledger
}

// Handoffs is what routing and the internal endpoints need from the node's
// handoffs and promotions.
type Handoffs interface {
	// Wait returns once no handoff of the partition is in progress here,
	// ctx ends or max has passed; at once when none is.
	Wait(ctx context.Context, partition int, max time.Duration)
	// TakeOver is the receiving side of a handoff: the previous master has
	// released the lease of partition after this node acknowledged its
	// history up to from; campaign now and answer the new assignment.
	TakeOver(ctx context.Context, partition int, from store.Position) (shard.Assignment, error)
	// Positions is how far this node holds each partition's history (for
	// a promotion: the most current copy takes over), and whether its copy
	// awaits a full copy.
	Positions(partitions []int) map[int]PositionAnswer
	// HandedOver reports whether this node handed the partition to its
	// next master by an orderly handoff that carried its history up to pos.
	HandedOver(partition int, pos store.Position) bool
}

// Replication is what write concerns need from the replication shipper.
type Replication interface {
	// WaitReplicated waits until need of the partition's replicas (as
	// replicas() lists them at each check) hold pos.
	WaitReplicated(ctx context.Context, partition int, pos store.Position, replicas func() []string, need int) (int, error)
	// WaitMajorityHeld waits until the partition's majority-committed
	// position (see replicate.Shipper.MajorityHeld: established only by a
	// position of the current tenure's epoch) reaches pos; it returns the
	// position reached.
	WaitMajorityHeld(ctx context.Context, partition int, pos store.Position) (store.Position, error)
	// Lags lists each replica's progress on the partitions this node masters.
	Lags() []replicate.Lag
}

// Voter is this node as a lease voter.
type Voter interface {
	Vote(ctx context.Context, b lease.Batch) []lease.Decision
}

// Placer describes where a partition lives.
type Placer interface {
	Placement(partition int) PlacementView
	// Partitions is every partition's view (index = partition), as
	// Placement describes each: GET /v1/cluster?partitions=1. In-memory
	// state only; the API adds the positions.
	Partitions() []PartitionView
}

// The "request failed" line (answers from 500 up) is logged at most
// failLogMax times per failLogWindow; the next one says how many were held
// back (the metrics count them all).
const (
	failLogMax    = 50
	failLogWindow = 10 * time.Second
)

// Server answers HTTP requests for one node.
type Server struct {
	cfg       Config
	log       *slog.Logger
	store     *store.Store
	writer    *store.Writer
	metrics   *Metrics
	cursorKey []byte
	limits    doc.Limits
	// tokenMaxTTL is Config.TokenMaxTTL, defaulted.
	tokenMaxTTL time.Duration
	// verified keeps the tokens verified, until they expire.
	verified verifiedTokens
	ready    atomic.Bool
	router   chi.Router
	// failLogs rate-limits the "request failed" log line.
	failLogs *logsafe.Limiter
	// queryHook, if set, is called before each document a query evaluates
	// (tests).
	queryHook func(ctx context.Context)
	// marking is the tenure markers being written, per partition (see
	// markTenure).
	markMu  sync.Mutex
	marking map[int]chan struct{}
	// streams are the replication streams served (stream.go).
	streams streams
}

// New creates the API of a node over its store and writer.
func New(cfg Config, st *store.Store, w *store.Writer) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	// Cursors are signed with a key every node derives from AUTH_SECRET, so
	// a page cursor from one node works on another and cannot be forged.
	key := sha256.Sum256(append([]byte("shoal query cursor\x00"), cfg.AuthSecret...))
	s := &Server{marking: map[int]chan struct{}{}, cfg: cfg, log: cfg.Logger, store: st, writer: w, metrics: cfg.Metrics, cursorKey: key[:], tokenMaxTTL: cfg.TokenMaxTTL,
		limits:   doc.Limits{MaxFields: cfg.MaxDocumentFields, MaxBytes: int(cfg.MaxDocumentBytes)},
		failLogs: logsafe.NewLimiter(failLogMax, failLogWindow, nil)}
	if s.tokenMaxTTL <= 0 {
		s.tokenMaxTTL = DefaultTokenMaxTTL
	}
	s.streams.ctx, s.streams.stop = context.WithCancel(context.Background())
	s.router = s.routes()
	return s
}

// cursorKeyFor binds page cursors to one collection of one user, so a
// cursor is refused anywhere else.
func (s *Server) cursorKeyFor(user, coll string) []byte {
	m := hmac.New(sha256.New, s.cursorKey)
	m.Write([]byte(user + "/" + coll))
	return m.Sum(nil)
}

// SetReady says whether the node takes traffic (/readyz).
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(s.deadlines, s.observe)
	notFound := func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, problem(http.StatusNotFound, TypeRouteNotFound, "No such route",
			logsafe.ClipTo(r.Method, 16)+" "+logsafe.ClipTo(r.URL.Path, 200)+" is not a Shoal route; see the README for the API"))
	}
	r.NotFound(notFound)
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, problem(http.StatusMethodNotAllowed, TypeMethodNotAllowed, "Method not allowed",
			logsafe.ClipTo(r.Method, 16)+" is not allowed on "+logsafe.ClipTo(r.URL.Path, 200)))
	})
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, NodeStatus{Node: s.cfg.NodeID, Status: "ok"})
	})
	r.Get("/readyz", s.readyz)
	// The dashboard's files (internal/ui) need no token: they hold no
	// data. Every call the page makes goes to /v1 with the admin token
	// the user pastes into it.
	dashboard := ui.Handler(http.HandlerFunc(notFound))
	r.Get("/ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, ui.Prefix, http.StatusMovedPermanently)
	})
	r.Get(ui.Prefix+"*", dashboard.ServeHTTP)
	r.Head(ui.Prefix+"*", dashboard.ServeHTTP)
	r.Handle("/metrics", promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{}))
	// Outside the /v1 group below, so that it needs no token (see
	// serveOpenAPI).
	r.Get("/v1/openapi.json", serveOpenAPI)
	r.Route("/internal", func(r chi.Router) {
		r.Use(s.requireNodeCertificate, s.requireSignature)
		r.Get("/v1/ping", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"node": s.cfg.NodeID, "from": cluster.SignedBy(r.Context())})
		})
		r.Post("/v1/lease", s.vote)
		r.Post("/v1/replicate", s.replicate)
		// v3 and v2 take the same requests (replicate.ReadRequest reads
		// both versions); masters of this version send on v3, older ones
		// on v2. Masters of this version open their streams on v4, whose
		// answers are sealed; older ones on v3 or v2.
		r.Post("/v3/replicate", s.replicateBinary)
		r.Post("/v4/replicate-stream", s.replicateStreamSealed)
		r.Post("/v3/replicate-stream", s.replicateStream)
		r.Post("/v2/replicate", s.replicateBinary)
		r.Post("/v2/replicate-stream", s.replicateStream)
		r.Post("/v1/takeover", s.takeOver)
		r.Post("/v1/positions", s.positions)
		r.Post("/v1/check-copy", s.checkCopy)
		r.Post("/v1/voters", s.voters)
	})
	if s.cfg.Pprof {
		r.With(s.requireAuth, s.requireAdmin).Mount("/debug", middleware.Profiler())
	}
	r.Route("/v1", func(r chi.Router) {
		// forwardedOnly first: the answer to a forward, a refusal of its
		// token included, is sealed for the node that forwarded it.
		r.Use(s.forwardedOnly, s.requireAuth, checkQuery)
		r.With(s.requireAdmin).Get("/cluster", s.clusterView)
		r.With(s.requireAdmin).Get("/admin/rollback", s.listRollback)
		r.With(s.requireAdmin).Get("/placement", s.placementTable)
		r.Route("/users/{user}", func(r chi.Router) {
			r.Use(s.userScope)
			r.Delete("/", s.writes(s.eraseUser))
			r.Get("/placement", s.placement)
			r.Get("/collections", s.scans(s.listCollections))
			r.Route("/collections/{coll}/documents", func(r chi.Router) {
				r.Use(s.collectionScope)
				r.Post("/", s.writes(s.createDocument))
				r.Get("/", s.scans(s.queryDocuments))
				r.Route("/{id}", func(r chi.Router) {
					r.Use(s.idScope)
					r.Get("/", s.reads(s.getDocument))
					r.Put("/", s.writes(s.putDocument))
					r.Patch("/", s.writes(s.patchDocument))
					r.Delete("/", s.writes(s.deleteDocument))
				})
			})
		})
	})
	return r
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.ready.Load() {
		writeProblem(w, unavailable("the node is starting or shutting down"))
		return
	}
	if err := s.store.Ping(r.Context()); err != nil {
		// Anyone may ask: the driver's error (it names the store's
		// address) is for the log.
		s.log.Warn("readiness check: the store does not answer", "err", clipError(err))
		writeProblem(w, unavailable("the node's store does not answer; its log says why"))
		return
	}
	var rd Readiness
	if s.cfg.Readiness != nil {
		rd = s.cfg.Readiness()
	}
	if rd.Waiting != "" {
		writeProblem(w, unavailable("the node is not ready: it waits for "+rd.Waiting))
		return
	}
	writeJSON(w, http.StatusOK, NodeStatus{Node: s.cfg.NodeID, Status: "ready", WithoutMaster: rd.WithoutMaster})
}

// Readiness is what a node still waits for before it takes traffic.
type Readiness struct {
	// Waiting names it ("" : ready).
	Waiting string
	// WithoutMaster lists the partitions with no known master when the
	// node is ready all the same (its wait for them is over).
	WithoutMaster []int
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// observe names the serving node on every answer, and counts and times
// requests by route pattern.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.Header().Set("X-Served-By", s.cfg.NodeID)
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		// Every label takes only values from a known set: the route is
		// the pattern the request matched (never its path), the method a
		// standard one or "other".
		method := methodLabel(r.Method)
		s.metrics.requests.WithLabelValues(route, method, strconv.Itoa(rec.status)).Inc()
		s.metrics.requestDuration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
		if rec.status >= 500 && route != "/readyz" { // a 503 there answers the question
			// Clients can cause these (a flood during a failover): clipped
			// and rate-limited.
			if ok, suppressed := s.failLogs.Allow(); ok {
				args := []any{"method", method, "route", route, "status", rec.status, "duration", time.Since(start)}
				if suppressed > 0 {
					args = append(args, "suppressed", suppressed)
				}
				s.log.Warn("request failed", args...)
			}
		}
	})
}

type ctxKey int

const principalKey ctxKey = 1

func (s *Server) requireAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, prob := s.authenticate(r)
		if prob != nil {
			s.log.Debug("request refused", "path", logsafe.Clip(r.URL.Path), "reason", logsafe.Clip(prob.Detail))
			writeProblem(w, prob)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, p)))
	})
}

func (s *Server) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !principalOf(r).Admin {
			writeProblem(w, problem(http.StatusForbidden, TypeForbidden, "Forbidden",
				"this route needs an admin token: mint one with `shoal token --admin`"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireNodeCertificate refuses, when node certificates are required, a
// request that did not come over TLS with a client certificate the CA
// signed (the handshake refuses one from another CA outright).
func (s *Server) requireNodeCertificate(next http.Handler) http.Handler {
	if !s.cfg.NodeCertificates {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			writeProblem(w, problem(http.StatusForbidden, TypeForbidden, "Forbidden",
				"/internal/ takes calls from nodes only, and this node requires theirs to present a certificate signed by its TLS_CA_FILE (TLS_CLIENT_AUTH=require): give the calling node TLS_CERT_FILE and TLS_KEY_FILE from that CA"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireSignature admits only node-to-node calls signed with the cluster
// secret; bearer tokens mean nothing here.
func (s *Server) requireSignature(next http.Handler) http.Handler {
	if s.cfg.Cluster == nil || s.cfg.Cluster.Signer() == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeProblem(w, unauthorized("this node has no CLUSTER_SECRET, so it answers no internal calls"))
		})
	}
	return s.cfg.Cluster.Signer().Middleware(s.log, next)
}

// listRollback lists the document states this node kept in its rollback
// collection: writes it acknowledged as master (write concern 1) that the
// next master never had.
func (s *Server) listRollback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query() // checkQuery refused a query string that does not parse
	limit := 1000
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			writeProblem(w, badRequest(TypeInvalidQuery, fmt.Sprintf("limit %q must be a whole number from 1 to 10000", v)))
			return
		}
		limit = n
	}
	docs, err := s.store.Rollbacks(r.Context(), limit+1) // one more tells whether the list is whole
	if err != nil {
		writeProblem(w, storeProblem(err))
		return
	}
	more := len(docs) > limit
	if more {
		docs = docs[:limit]
	}
	out := make([]wire.RolledBack, len(docs))
	for i, d := range docs {
		out[i] = wire.RolledBack(d)
	}
	writeJSON(w, http.StatusOK, RollbackList{Node: s.cfg.NodeID, RolledBack: out, More: more})
}

// replicate applies a replication request as a replica.
func (s *Server) replicate(w http.ResponseWriter, r *http.Request) {
	// Validated before anything is touched: a batch's partition indexes
	// the writer's per-partition state (partition 99999 crashed the node).
	req, err := replicate.DecodeValid(r.Body, s.cfg.PartitionCount)
	if err != nil {
		writeProblem(w, badRequest(TypeInvalidInternal, "unusable replication request: "+err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, replicate.Apply(r.Context(), s.writer, req))
}

// replicateBinary is replicate in the binary form (replicate.AppendRequest),
// which nodes of this version send: the same checks and the same answers,
// at a fraction of JSON's CPU.
func (s *Server) replicateBinary(w http.ResponseWriter, r *http.Request) {
	// The signature check read the body, bounded, into memory already.
	data, err := readall.Sized(r.Body, r.ContentLength)
	if err != nil {
		writeProblem(w, badRequest(TypeInvalidInternal, "unreadable replication request: "+err.Error()))
		return
	}
	req, err := replicate.ReadRequest(data)
	if err == nil {
		err = req.Validate(s.cfg.PartitionCount)
	}
	if err != nil {
		writeProblem(w, badRequest(TypeInvalidInternal, "unusable replication request: "+err.Error()))
		return
	}
	answer := replicate.AppendResponse(nil, replicate.Apply(r.Context(), s.writer, req))
	w.Header().Set("Content-Type", replicate.ContentTypeBinary)
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(answer)
}

// TakeOverRequest asks a node to take a partition's lease now: its
// previous master paused its writes, shipped its last changes (the node
// acknowledged them up to From) and released the lease.
type TakeOverRequest struct {
	Partition int            `json:"partition"`
	From      store.Position `json:"from"`
}

// takeOver is the receiving side of an orderly handoff.
func (s *Server) takeOver(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Handoffs == nil {
		writeProblem(w, unavailable("this node takes no partitions"))
		return
	}
	req, err := decodeTakeOver(r.Body, s.cfg.PartitionCount)
	if err != nil {
		writeProblem(w, badRequest(TypeInvalidInternal, err.Error()))
		return
	}
	a, err := s.cfg.Handoffs.TakeOver(r.Context(), req.Partition, req.From)
	if err != nil {
		writeProblem(w, problem(http.StatusConflict, TypeUnavailable, "Takeover refused", err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// CheckCopyRequest asks a partition's master to check the asking node's
// copy of it (see Config.CheckCopy); the asking node is the signer.
type CheckCopyRequest struct {
	Partition int `json:"partition"`
}

// CheckCopyAnswer is the master's answer: its epoch, the tenure whose
// batch the asking node will be sent.
type CheckCopyAnswer struct {
	Partition int    `json:"partition"`
	Epoch     uint64 `json:"epoch"`
}

// checkCopy is a master's side of a node asking it to check its copy.
func (s *Server) checkCopy(w http.ResponseWriter, r *http.Request) {
	if s.cfg.CheckCopy == nil {
		writeProblem(w, unavailable("this node checks no copies"))
		return
	}
	req, err := decodeCheckCopy(r.Body, s.cfg.PartitionCount)
	if err != nil {
		writeProblem(w, badRequest(TypeInvalidInternal, err.Error()))
		return
	}
	epoch, err := s.cfg.CheckCopy(req.Partition, cluster.SignedBy(r.Context()))
	if err != nil {
		writeProblem(w, problem(http.StatusConflict, TypeUnavailable, "Copy check refused", err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, CheckCopyAnswer{Partition: req.Partition, Epoch: epoch})
}

// PositionsRequest asks how far a node holds some partitions' histories.
type PositionsRequest struct {
	Partitions []int `json:"partitions"`
}

// positions answers how far this node holds each partition asked about.
func (s *Server) positions(w http.ResponseWriter, r *http.Request) {
	req, err := decodePositions(r.Body, s.cfg.PartitionCount)
	if err != nil {
		writeProblem(w, badRequest(TypeInvalidInternal, err.Error()))
		return
	}
	out := positionsAnswer{}
	if s.cfg.Handoffs != nil {
		out = s.cfg.Handoffs.Positions(req.Partitions)
	}
	writeJSON(w, http.StatusOK, out)
}

// vote answers a batch of lease requests as this node's voter.
func (s *Server) vote(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Voter == nil {
		writeProblem(w, unavailable("this node takes no part in leases"))
		return
	}
	b, err := lease.DecodeBatch(r.Body, s.cfg.PartitionCount, cluster.SignedBy(r.Context()))
	if err != nil {
		writeProblem(w, badRequest(TypeInvalidInternal, "unusable lease batch: "+err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, s.cfg.Voter.Vote(r.Context(), b))
}

// VoterSetsAnswer is a node's lease voter set in use and the one it is
// heading for (the same while no change is being applied).
type VoterSetsAnswer struct {
	Current []string `json:"current"`
	Target  []string `json:"target"`
}

// voters answers which lease voter set this node uses: a node that starts
// with an empty store asks, so that it steps from the set in use.
func (s *Server) voters(w http.ResponseWriter, r *http.Request) {
	if err := decodeVoters(r.Body); err != nil {
		writeProblem(w, badRequest(TypeInvalidInternal, err.Error()))
		return
	}
	if s.cfg.VoterSets == nil {
		writeProblem(w, unavailable("this node takes no part in leases"))
		return
	}
	cur, target := s.cfg.VoterSets()
	writeJSON(w, http.StatusOK, VoterSetsAnswer{Current: cur, Target: target})
}

func (s *Server) clusterView(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query() // checkQuery refused a query string that does not parse
	if s.cfg.Cluster == nil {
		writeProblem(w, unavailable("the node's membership is not running"))
		return
	}
	out := ClusterAnswer{View: s.cfg.Cluster.View()}
	if s.cfg.Table != nil {
		ps := &PartitionSummary{Count: s.cfg.PartitionCount, Masters: map[string]int{}}
		for _, a := range s.cfg.Table.Snapshot() {
			if a.Master == "" {
				ps.WithoutMaster++
			} else {
				ps.Masters[a.Master]++
			}
			for _, r := range a.Responsible {
				if r != a.Master {
					if ps.Copies == nil {
						ps.Copies = map[string]int{}
					}
					ps.Copies[r]++
				}
			}
		}
		if s.cfg.Unreconciled != nil {
			if n := len(s.cfg.Unreconciled()); n > 0 {
				ps.Unreconciled = map[string]int{s.cfg.NodeID: n}
			}
		}
		out.Partitions = ps
	}
	if q.Get("partitions") == "1" {
		out.PartitionTable = s.partitionTable()
	}
	if s.cfg.Replication != nil {
		all := q.Get("all") == "1"
		for _, l := range s.cfg.Replication.Lags() {
			if all || l.Behind > 0 || l.CatchUp {
				out.Replication = append(out.Replication, l.ReplicaLag)
			}
		}
	}
	if s.cfg.Moves != nil {
		out.Moves = s.cfg.Moves()
	}
	if q.Get("moves") == "all" {
		s.othersMoves(r, &out)
	}
	if s.cfg.VoterSets != nil {
		cur, target := s.cfg.VoterSets()
		out.Voters = &VoterStatus{Current: cur, Target: target, Changing: !slices.Equal(cur, target)}
	}
	writeJSON(w, http.StatusOK, out)
}

// othersMovesTimeout bounds the question to each other member about its
// moves: a dashboard polls about once a second.
const othersMovesTimeout = 2 * time.Second

// othersMoves adds to out the moves of every other member (a node lists
// only the partitions moving from itself), asked in parallel with the
// caller's credentials as a signed forward of GET /v1/cluster. A member
// that is not UP, or does not answer in time, is named in MovesUnknown,
// never fatal.
func (s *Server) othersMoves(r *http.Request, out *ClusterAnswer) {
	type answer struct {
		node  string
		moves []MoveStatus
		err   error
	}
	var asked []*answer
	for _, m := range out.Members {
		switch {
		case m.Self || m.ID == s.cfg.NodeID:
		case m.State != cluster.Up:
			out.MovesUnknown = append(out.MovesUnknown, MovesUnknown{Node: m.ID, Reason: "member is " + string(m.State)})
		default:
			asked = append(asked, &answer{node: m.ID})
		}
	}
	var wg sync.WaitGroup
	for _, a := range asked {
		wg.Go(func() { a.moves, a.err = s.movesOf(r, a.node) })
	}
	wg.Wait()
	for _, a := range asked {
		if a.err != nil {
			out.MovesUnknown = append(out.MovesUnknown, MovesUnknown{Node: a.node, Reason: clipError(a.err)})
			continue
		}
		out.Moves = append(out.Moves, a.moves...)
	}
	slices.SortFunc(out.Moves, func(a, b MoveStatus) int { return a.Partition - b.Partition })
}

// movesOf asks node for the moves from it: GET /v1/cluster, forwarded.
func (s *Server) movesOf(r *http.Request, node string) ([]MoveStatus, error) {
	ask := r.Clone(r.Context())
	ask.Method, ask.URL.Path, ask.URL.RawPath, ask.URL.RawQuery = http.MethodGet, "/v1/cluster", "", ""
	resp, cancel, err := s.forward(r.Context(), ask, node, nil, othersMovesTimeout)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", node, resp.Status)
	}
	var theirs ClusterAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&theirs); err != nil {
		return nil, fmt.Errorf("%s: reading its answer: %v", node, err)
	}
	return theirs.Moves, nil
}

func principalOf(r *http.Request) Principal {
	p, _ := r.Context().Value(principalKey).(Principal)
	return p
}

func (s *Server) userScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := chi.URLParam(r, "user")
		if err := doc.ValidUser(user); err != nil {
			writeProblem(w, badRequest(TypeInvalidName, err.Error()))
			return
		}
		if !principalOf(r).CanAccess(user) {
			writeProblem(w, problem(http.StatusForbidden, TypeForbidden, "Forbidden",
				"this token is for user "+strconv.Quote(principalOf(r).User)+" and cannot reach the data of "+strconv.Quote(user)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) collectionScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := doc.ValidCollection(chi.URLParam(r, "coll")); err != nil {
			writeProblem(w, badRequest(TypeInvalidName, err.Error()))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) idScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := doc.ValidID(chi.URLParam(r, "id")); err != nil {
			writeProblem(w, badRequest(TypeInvalidName, err.Error()))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// writes routes a handler that changes a user's data to the partition's master.
func (s *Server) writes(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if prob := checkWriteConcern(r); prob != nil {
			writeProblem(w, prob)
			return
		}
		s.route(w, r, s.partitionOf(chi.URLParam(r, "user")), h)
	}
}

// checkWriteConcern refuses an unknown write concern before anything is
// written.
// maxWriteTimeout bounds X-Write-Timeout: a write waiting for its copies
// holds a handler, a connection and a goroutine.
const maxWriteTimeout = 60 * time.Second

// defaultWriteTimeout is how long a write waits for its write concern
// without X-Write-Timeout.
const defaultWriteTimeout = 5 * time.Second

// writeTimeout is how long the write r waits for its write concern (its
// X-Write-Timeout, which checkWriteConcern has checked, or the default).
func writeTimeout(r *http.Request) time.Duration {
	if d, err := time.ParseDuration(r.Header.Get("X-Write-Timeout")); err == nil && d > 0 {
		return min(d, maxWriteTimeout)
	}
	return defaultWriteTimeout
}

func checkWriteConcern(r *http.Request) *Problem {
	switch wc := r.Header.Get("X-Write-Concern"); wc {
	case "", "1", "majority", "all":
		if v := r.Header.Get("X-Write-Timeout"); v != "" {
			if d, err := time.ParseDuration(v); err != nil || d <= 0 || d > maxWriteTimeout {
				return badRequest(TypeInvalidHeader, fmt.Sprintf("X-Write-Timeout %q: use a duration like 5s or 500ms, at most %gs", logsafe.ClipTo(v, 64), maxWriteTimeout.Seconds()))
			}
		}
		return nil
	default:
		return badRequest(TypeInvalidHeader, fmt.Sprintf("X-Write-Concern %q: use 1, majority or all", logsafe.ClipTo(wc, 64)))
	}
}

// awaitWriteConcern waits, after a write committed on this master at pos,
// until as many copies hold it as the request's write concern asks:
// "majority" is REPLICATION_FACTOR/2+1 copies (master included), "all"
// REPLICATION_FACTOR copies, both capped by the nodes the cluster has that
// can hold a copy. It answers 504 when X-Write-Timeout (default 5s)
// passes first, saying on how many copies the write is.
func (s *Server) awaitWriteConcern(r *http.Request, partition int, pos store.Position) *Problem {
	wc := r.Header.Get("X-Write-Concern")
	if wc == "" || wc == "1" {
		return nil
	}
	total, need := s.copiesFor(wc)
	if need <= 0 {
		return nil
	}
	replicas := s.countedReplicas(partition, pos)
	if s.cfg.Replication == nil {
		return problem(http.StatusGatewayTimeout, TypeTimeout, "Write concern not met",
			fmt.Sprintf("the write is applied on the master only (1 of %d copies): this node replicates to no one", total))
	}
	timeout := writeTimeout(r)
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	have, err := s.cfg.Replication.WaitReplicated(ctx, partition, pos, replicas, need)
	if err != nil {
		return problem(http.StatusGatewayTimeout, TypeTimeout, "Write concern not met",
			fmt.Sprintf("the write is applied on the master and on %d of %d copies; write concern %s needs %d: it was not confirmed within %s, and it is not undone",
				have+1, total, wc, need+1, timeout))
	}
	return nil
}

// copiesFor is how many copies a partition should have, and how many
// replicas beyond the master must hold a state for concern ("majority" or
// "all"). They count against the copies the partition should have, not
// against the replicas listed right now (a new tenure lists none for a
// moment).
func (s *Server) copiesFor(concern string) (total, need int) {
	total = 1
	if s.cfg.Copies != nil {
		total = max(s.cfg.Copies(), 1)
	}
	if concern == "all" {
		return total, shard.WriteQuorum(total).ReplicaSlots()
	}
	return total, shard.WriteQuorum(total).MajorityReplicas()
}

// countedReplicas is the replicas whose acknowledgements count for a state
// at pos of the partition, as the list stands at each check. It learns the
// list at once, while this node should still be master.
func (s *Server) countedReplicas(partition int, pos store.Position) func() []string {
	total, _ := s.copiesFor("all")
	var listed []string // the replicas while this node was master
	replicas := func() []string {
		// Only while this node is the partition's master do its replicas
		// confirm anything: after a failover, a replica may yet roll the
		// write back. After an orderly handoff that carried the write, the
		// next master continues this history, so what the replicas
		// acknowledged still stands.
		if s.cfg.Table == nil || s.cfg.Leases == nil {
			return nil
		}
		epoch, ok := s.cfg.Leases.Holds(partition)
		if !ok {
			if s.cfg.Handoffs != nil && s.cfg.Handoffs.HandedOver(partition, pos) {
				return listed
			}
			return nil
		}
		// Only the regular replicas count (shard.WriteQuorum), as they do
		// for the shipper's majority-committed position: an incoming copy
		// or a draining replica listed after them is not among the copies
		// a promotion asks.
		replicas := s.cfg.Table.Get(partition).ReplicasOf(s.cfg.NodeID)
		if replicas == nil {
			return nil // not mastered here with replicas listed: listed stays
		}
		listed = shard.WriteQuorum(total).Replicas(replicas)
		if s.cfg.Counted != nil {
			listed = s.cfg.Counted(partition, epoch, listed)
		}
		return listed
	}
	replicas()
	return replicas
}

// reads routes a handler that reads a user's data down the responsible
// list, trying each copy for READ_TRY_TIMEOUT.
func (s *Server) reads(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.routeRead(w, r, s.partitionOf(chi.URLParam(r, "user")), s.readTimeout(), h)
	}
}

// scans is reads for a handler whose work grows with the data it reads
// (a query, the list of collections): each copy is tried for
// queryTryTimeout.
func (s *Server) scans(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.routeRead(w, r, s.partitionOf(chi.URLParam(r, "user")), max(s.readTimeout(), queryTryTimeout), h)
	}
}

// partitionOf is where user's documents live.
func (s *Server) partitionOf(user string) int { return shard.PartitionOf(user, s.cfg.PartitionCount) }

// storeProblem turns an error from the store or writer into a problem.
func storeProblem(err error) *Problem {
	var p *Problem
	switch {
	case errors.As(err, &p):
		return p
	case errors.Is(err, store.ErrOutcomeUnknown):
		return problem(http.StatusServiceUnavailable, TypeTimeout, "Outcome unknown",
			"the store failed while committing this write; it may or may not have been applied: read the document before retrying")
	case errors.Is(err, store.ErrLeaseLost):
		return problem(http.StatusServiceUnavailable, TypeTimeout, "Outcome unknown",
			"the partition changed master while this write was being committed; it may or may not have been applied: read the document to find out")
	case errors.Is(err, store.ErrNotMaster):
		return unavailable("this partition is changing master; retry shortly")
	case errors.Is(err, store.ErrClosed):
		return unavailable("the node is shutting down; retry on another node or in a moment")
	case errors.Is(err, context.DeadlineExceeded):
		return problem(http.StatusGatewayTimeout, TypeTimeout, "Timeout",
			"the request's deadline passed before its change was confirmed; it may or may not have been applied: read the document to find out")
	case errors.Is(err, context.Canceled):
		return problem(499, TypeTimeout, "Client closed request", "the request was cancelled")
	case errors.Is(err, store.ErrUnavailable):
		return unavailable("the node's store is not answering; retry in a moment")
	}
	var de *doc.Error
	if errors.As(err, &de) {
		return badRequest(TypeInvalidDocument, de.Error())
	}
	return problem(http.StatusInternalServerError, TypeInternal, "Internal error", "the node could not complete the request; its log says why")
}
