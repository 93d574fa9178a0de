"""The scale-out store: one PostgreSQL database (``PostgresStore``, with ``stead[postgres]``),
and its half of the execution ledger. Imports no other dialect; importing it needs psycopg, so
``stead.store`` imports it only when a ``postgresql://`` URL is opened.

Same contract as ``SQLiteStore``, and the same shared code (``stead.store.sql._store.SQLStore``);
``_store`` holds PostgreSQL's half: the pool, error translation, notices and waiting, and the
statements whose shape is its own. What PostgreSQL adds is concurrency across machines:

* **Append** is one statement (a conditional ``UPDATE`` of the run's row, the event inserts
  and the notices, chained as CTEs that write only when the ``UPDATE`` matched). The epoch
  and sequence checks are the ``UPDATE``'s ``WHERE``: they are evaluated under the row lock,
  in the write's own transaction, re-checked against the committed row if another writer got
  there first. No read-then-write window exists for a stale owner to slip through. A batch
  of appends (group commit) is one set-based statement of the same shape (``_batch``).
* **Claims** pick runs with ``FOR UPDATE SKIP LOCKED``: concurrent claimers skip each other's
  rows instead of queueing on them, and each claimed run's epoch is bumped in the same
  statement.
* **Notices**: every append ``pg_notify``-s ``run_id:seq`` on its run's own channel at
  commit (a key and a position, never an outcome), and a run that becomes claimable
  (created, requeued, released, decided while no one holds it) is announced on the
  *claimable* channel. One ``LISTEN`` connection per store (``_listen``) listens to the
  channels of the runs someone waits on and feeds ``stead.store.sql._watch.Watcher``, which
  re-reads durable state on each notice and polls besides; it reconnects when dropped.
  Per-run channels keep notices off the workers that do not care: with one shared channel
  every worker would read every append of the fleet (measured: 40% of throughput).
  PostgreSQL still wakes every connection that listens to anything in the database at each
  commit that notifies, whatever its channel: a worker's listener leaves (``UNLISTEN``) once
  nobody has waited for claimable runs for ``CLAIMABLE_LINGER`` seconds (its slots are full),
  so a busy fleet does not wake each of its workers at every step of every other.

**Unsynced commits.** ``append(..., sync=False)``, ``renew`` and ``release`` commit with
``synchronous_commit = off`` for their own transaction (the function form of ``SET LOCAL``,
evaluated in the statement: no extra round trip). They are visible at once and become durable
with the next commit that waits for the WAL flush, because WAL is one sequence and a flush
covers every record before the one it waits for: the event after an unsynced ``run_started``
brings it to disk. What a crash loses first (an async commit can still be in PostgreSQL's WAL
buffers, so a crash of the server alone loses it, not only a power cut) is a suffix of the
log and loses no effect: a renewal or release rolled back makes a lease end sooner or later,
and the epoch, which fences writers, does not move; a ``run_started`` rolled back refuses its
writer's next append (stale sequence), unless another process appended at that very sequence
in the instant between the restart and that append (a cancel request would have to).

``claim`` and ``claim_next`` stay synced, unlike on SQLite. A claim makes a new epoch; losing
it while its claimant lives on (with SQLite the store and every worker share one machine and
die together; with PostgreSQL they do not) would let the next claimant get the same epoch
number, and two owners under one epoch are not fenced from each other. One flush per claim is
what keeps fencing from depending on timing.

Sessions are made to give up a transaction left idle (``idle_in_transaction_session_timeout``),
so a worker frozen mid-transaction (SIGSTOP, a partition) cannot hold a run's row lock, and
with it the run, for longer than that.

Every statement of the pool is bounded in time, so that a worker notices a dead server or a
partition while its leases are still valid, instead of hanging on an open connection: by the
server (``statement_timeout``, ``lock_timeout``), and by the kernel on the client's side,
where a partition is felt (``tcp_user_timeout``: sent bytes not acknowledged in time close
the connection; TCP keepalives find an idle connection dead; ``connect_timeout``). A lease
holder lowers each to half its lease's margin (``bound_waits``), so a wait ends while its
lease is still valid; its own deadline (``stead._lease``) fires whatever a statement does.

Leases compare times the workers pass in (``now``): keep the machines' clocks within a small
fraction of the lease TTL of each other (NTP does).
"""

from stead.store.postgres._store import PostgresStore

__all__ = ["PostgresStore"]
