// The client scenario in Go with pgx v4 (built and run by ../go.sh).
// A fencing token is a bigint: it scans into an int64 and is sent as one,
// with no type registration. The stale-write error arrives as
// *pgconn.PgError with Code "23T01", Detail and Hint.
// Connection parameters come from the libpq environment (PGHOST, PGPORT, ...).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

const resource = "clients:go"
const above2to53 int64 = 9007199254740993 // 2^53 + 1

var failures = 0

func check(ok bool, what string) {
	if ok {
		fmt.Println("ok - " + what)
	} else {
		fmt.Println("FAILED - " + what)
		failures++
	}
}

func must(err error) {
	if err != nil {
		fmt.Println("unexpected error:", err)
		os.Exit(1)
	}
}

func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

const write = "UPDATE go_ledger SET balance = balance + 1, fence_token = $1 WHERE id = 1"

func main() {
	ctx := context.Background()
	connect := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, "") // PGHOST, PGPORT, PGUSER, PGDATABASE
		must(err)
		return c
	}
	setup := connect()
	for _, sql := range []string{
		"SET client_min_messages = warning",
		"CREATE EXTENSION IF NOT EXISTS fencing",
		"DROP TABLE IF EXISTS go_ledger",
		"CREATE TABLE go_ledger (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token)",
	} {
		_, err := setup.Exec(ctx, sql)
		must(err)
	}
	// protect() refuses tables holding tokens past 2^52: protect first, then a
	// superuser moves the counter past 2^53 + 1.
	_, err := setup.Exec(ctx, "SELECT fencing.protect('go_ledger')")
	must(err)
	_, err = setup.Exec(ctx, "SELECT fencing.advance_past('go_ledger', $1)", above2to53)
	must(err)
	_, err = setup.Exec(ctx, "INSERT INTO go_ledger VALUES (1, 0, $1)", above2to53)
	must(err)

	s1, s2 := connect(), connect()
	// (1) acquire; not reentrant by default.
	var t1 int64
	must(s1.QueryRow(ctx, "SELECT fencing.acquire($1)", resource).Scan(&t1))
	check(t1 > above2to53, fmt.Sprintf("acquire: T1 = %d is an int64 above 2^53 + 1", t1))
	var dummy int64
	err = s1.QueryRow(ctx, "SELECT fencing.acquire($1)", resource).Scan(&dummy)
	check(sqlstate(err) == "55006", "a second plain acquire fails with 55006 (got "+sqlstate(err)+")")

	// (2) the token as an int64, both ways.
	tag, err := s1.Exec(ctx, write, t1)
	check(err == nil && tag.RowsAffected() == 1, "fenced write with T1 accepted")
	var stored int64
	must(s1.QueryRow(ctx, "SELECT fence_token FROM go_ledger WHERE id = 1").Scan(&stored))
	check(stored == t1, fmt.Sprintf("T1 read back exactly as an int64 (%d)", stored))
	var anyv interface{}
	must(s1.QueryRow(ctx, "SELECT fence_token FROM go_ledger WHERE id = 1").Scan(&anyv))
	_, isInt64 := anyv.(int64)
	check(isInt64, fmt.Sprintf("scanned into interface{}, a token is an int64 (%T)", anyv))
	_, err = s1.Exec(ctx, "SELECT fencing.release($1)", resource)
	must(err)
	var t2 int64
	must(s2.QueryRow(ctx, "SELECT fencing.acquire($1, wait => '10 s')", resource).Scan(&t2))
	tag, err = s2.Exec(ctx, write, t2)
	check(t2 > t1 && err == nil && tag.RowsAffected() == 1, "T2 > T1, fenced write with T2 accepted")

	// (3) the stale write.
	_, err = s1.Exec(ctx, write, t1)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		check(pgErr.Code == "23T01", "stale write returns *pgconn.PgError with Code "+pgErr.Code)
		check(pgErr.Message == `stale fence token for relation "go_ledger"` && pgErr.Detail != "" && pgErr.Hint != "",
			"message, detail and hint reachable")
	} else {
		check(false, fmt.Sprintf("stale write returns *pgconn.PgError (got %v)", err))
	}
	check(s1.Ping(ctx) == nil, "the connection is usable after the error")
	_, err = s2.Exec(ctx, "SELECT fencing.release($1)", resource)
	must(err)

	// (4) acquire_xact inside pool.BeginFunc; (5) use($1), then a write with no token.
	pool, err := pgxpool.Connect(ctx, "")
	must(err)
	var t3, t4 int64
	err = pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT fencing.acquire_xact($1)", resource).Scan(&t3); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, write, t3)
		return err
	})
	check(err == nil && t3 > t2, "acquire_xact in pool.BeginFunc: T3 > T2")
	var n int64
	must(pool.QueryRow(ctx, "SELECT count(*) FROM fencing.locks WHERE resource = $1", resource).Scan(&n))
	check(n == 0, "the transaction lock ended with the commit")
	err = pool.BeginFunc(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT fencing.acquire_xact($1)", resource).Scan(&t4); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT fencing.use($1)", t4); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE go_ledger SET balance = balance + 1 WHERE id = 1")
		return err
	})
	must(err)
	must(pool.QueryRow(ctx, "SELECT fence_token FROM go_ledger WHERE id = 1").Scan(&stored))
	check(stored == t4, "use($1) stamped the write that carries no token with T4")
	pool.Close()

	// (6) lease expiry: the server ends the silent holder's connection.
	s3 := connect()
	var t5 int64
	must(s3.QueryRow(ctx, "SELECT fencing.acquire($1, lease => '1 s')", resource).Scan(&t5))
	time.Sleep(2500 * time.Millisecond)
	_, err = s3.Exec(ctx, "SELECT 1")
	check(err != nil, fmt.Sprintf("the expired lease ended the connection (%v)", err))
	check(sqlstate(err) == "57P05" && strings.Contains(err.Error(), "fencing lease of 1000 ms expired"),
		"the error is the FATAL 57P05 that names the lease")
	check(s3.IsClosed(), "pgx reports the connection closed")
	s4 := connect()
	var t6 int64
	must(s4.QueryRow(ctx, "SELECT fencing.acquire($1)", resource).Scan(&t6))
	tag, err = s4.Exec(ctx, write, t6)
	check(t6 > t5 && err == nil && tag.RowsAffected() == 1, "reconnected: acquired again with a greater token and wrote")
	_, err = s4.Exec(ctx, write, t5)
	check(sqlstate(err) == "23T01", "a write with the expired lease's token fails with 23T01")
	_, err = s4.Exec(ctx, "SELECT fencing.release_all()")
	must(err)
	for _, c := range []*pgx.Conn{setup, s1, s2, s4} {
		c.Close(ctx)
	}
	if failures > 0 {
		fmt.Printf("pgx v4: %d check(s) failed\n", failures)
		os.Exit(1)
	}
	fmt.Println("pgx v4: all checks passed")
}
