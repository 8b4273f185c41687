package main

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	_ "modernc.org/sqlite"
)

// One table for every partition, so that one transaction carries the
// writes of many partitions. Rowid table (bodies are ~1 KiB: WITHOUT ROWID
// suits small rows), with:
//   - the primary key (part, key): point reads and key ranges;
//   - docs_pos (part, epoch, seq), unique: catch-up scans and the last
//     position, both index ranges with a limit;
//   - docs_tomb (part, updated) WHERE deleted: tombstones by time, for the
//     purge (maintained on every write, not queried by the spike).
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS docs (
	part    INTEGER NOT NULL,
	key     TEXT    NOT NULL,
	version INTEGER NOT NULL,
	epoch   INTEGER NOT NULL,
	seq     INTEGER NOT NULL,
	deleted INTEGER NOT NULL,
	updated INTEGER NOT NULL,
	body    BLOB,
	PRIMARY KEY (part, key)
);
CREATE UNIQUE INDEX IF NOT EXISTS docs_pos ON docs (part, epoch, seq);
CREATE INDEX IF NOT EXISTS docs_tomb ON docs (part, updated) WHERE deleted;
`

const sqliteUpsert = `INSERT INTO docs (part, key, version, epoch, seq, deleted, updated, body)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (part, key) DO UPDATE SET version = excluded.version, epoch = excluded.epoch,
	seq = excluded.seq, deleted = excluded.deleted, updated = excluded.updated, body = excluded.body`

const sqliteCols = `key, version, epoch, seq, deleted, updated, body`

// sqliteEngine writes through one connection (SQLite has one writer) and
// reads through a small pool (WAL readers do not block the writer).
type sqliteEngine struct {
	w, r                        *sql.DB
	upsert                      *sql.Stmt
	get1, rangeQ, afterQ, lastQ *sql.Stmt
}

func openSQLite(dir string, syncMode string, cacheKiB int) (*sqliteEngine, error) {
	dsn := fmt.Sprintf("file:%s?_pragma=journal_mode(WAL)&_pragma=synchronous(%s)&_pragma=busy_timeout(10000)&_pragma=cache_size(-%d)",
		filepath.Join(dir, "shoal.db"), syncMode, cacheKiB)
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	// The pragmas of the DSN are applied to every connection; check that
	// they took (synchronous: 1 NORMAL, 2 FULL).
	var journal string
	var syncLevel int
	if err := w.QueryRow(`PRAGMA journal_mode`).Scan(&journal); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if err := w.QueryRow(`PRAGMA synchronous`).Scan(&syncLevel); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if want := map[string]int{"NORMAL": 1, "FULL": 2}[syncMode]; journal != "wal" || syncLevel != want {
		w.Close()
		return nil, fmt.Errorf("sqlite: journal_mode %s, synchronous %d; want wal, %d", journal, syncLevel, want)
	}
	if _, err := w.Exec(sqliteSchema); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: schema: %w", err)
	}
	r, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(4)
	e := &sqliteEngine{w: w, r: r}
	for _, s := range []struct {
		db  *sql.DB
		to  **sql.Stmt
		sql string
	}{
		{w, &e.upsert, sqliteUpsert},
		{r, &e.get1, `SELECT ` + sqliteCols + ` FROM docs WHERE part = ? AND key = ?`},
		{r, &e.rangeQ, `SELECT ` + sqliteCols + ` FROM docs WHERE part = ? AND key > ? ORDER BY key LIMIT ?`},
		{r, &e.afterQ, `SELECT ` + sqliteCols + ` FROM docs WHERE part = ? AND (epoch, seq) > (?, ?) ORDER BY epoch, seq LIMIT ?`},
		{r, &e.lastQ, `SELECT epoch, seq FROM docs WHERE part = ? ORDER BY epoch DESC, seq DESC LIMIT 1`},
	} {
		if *s.to, err = s.db.Prepare(s.sql); err != nil {
			e.close()
			return nil, fmt.Errorf("sqlite: preparing %q: %w", s.sql, err)
		}
	}
	return e, nil
}

func (e *sqliteEngine) name() string { return "sqlite" }

// plans returns SQLite's query plan of each read, to check that every one
// is an index search.
func (e *sqliteEngine) plans() (map[string][]string, error) {
	out := map[string][]string{}
	for name, q := range map[string]string{
		"get":       `SELECT ` + sqliteCols + ` FROM docs WHERE part = 0 AND key = 'k'`,
		"range":     `SELECT ` + sqliteCols + ` FROM docs WHERE part = 0 AND key > 'k' ORDER BY key LIMIT 10`,
		"scanAfter": `SELECT ` + sqliteCols + ` FROM docs WHERE part = 0 AND (epoch, seq) > (1, 5) ORDER BY epoch, seq LIMIT 500`,
		"last":      `SELECT epoch, seq FROM docs WHERE part = 0 ORDER BY epoch DESC, seq DESC LIMIT 1`,
	} {
		rows, err := e.r.Query(`EXPLAIN QUERY PLAN ` + q)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				rows.Close()
				return nil, err
			}
			out[name] = append(out[name], detail)
		}
		rows.Close()
	}
	return out, nil
}

func (e *sqliteEngine) write(docs []doc) error {
	tx, err := e.w.Begin()
	if err != nil {
		return err
	}
	st := tx.Stmt(e.upsert)
	for _, d := range docs {
		var body any
		if !d.deleted {
			body = d.body
		}
		if _, err := st.Exec(d.part, d.key, d.version, int64(d.pos.epoch), int64(d.pos.seq), d.deleted, d.updated, body); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

func (e *sqliteEngine) load(docs []doc) error {
	for i := 0; i < len(docs); i += 1000 {
		if err := e.write(docs[i:min(i+1000, len(docs))]); err != nil {
			return err
		}
	}
	return nil
}

func (e *sqliteEngine) commit(docs []doc) error { return e.write(docs) }

type scanner interface{ Scan(dest ...any) error }

func sqliteDoc(part int, s scanner) (doc, error) {
	d := doc{part: part}
	var epoch, seq int64
	if err := s.Scan(&d.key, &d.version, &epoch, &seq, &d.deleted, &d.updated, &d.body); err != nil {
		return doc{}, err
	}
	d.pos = pos{uint64(epoch), uint64(seq)}
	return d, nil
}

func (e *sqliteEngine) get(part int, key string) (doc, bool, error) {
	d, err := sqliteDoc(part, e.get1.QueryRow(part, key))
	if errors.Is(err, sql.ErrNoRows) {
		return doc{}, false, nil
	}
	return d, err == nil, err
}

func (e *sqliteEngine) many(part int, st *sql.Stmt, args ...any) ([]doc, error) {
	rows, err := st.Query(args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []doc
	for rows.Next() {
		d, err := sqliteDoc(part, rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func (e *sqliteEngine) keyRange(part int, afterKey string, n int) ([]doc, error) {
	return e.many(part, e.rangeQ, part, afterKey, n)
}

func (e *sqliteEngine) scanAfter(part int, after pos, n int) ([]doc, error) {
	return e.many(part, e.afterQ, part, int64(after.epoch), int64(after.seq), n)
}

func (e *sqliteEngine) last(part int) (pos, error) {
	var epoch, seq int64
	err := e.lastQ.QueryRow(part).Scan(&epoch, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return pos{}, nil
	}
	return pos{uint64(epoch), uint64(seq)}, err
}

func (e *sqliteEngine) close() error {
	for _, s := range []*sql.Stmt{e.upsert, e.get1, e.rangeQ, e.afterQ, e.lastQ} {
		if s != nil {
			s.Close()
		}
	}
	return errors.Join(e.r.Close(), e.w.Close())
}
