/*
 * claim_cursor.cpp — where a lane's claim cursor lives (docs/design.md §4, "Claim cursor").
 *
 * From 1.1 a claim does not update its lane's head row: it locks the head and appends a
 * claim mark (awa.claim_marks), so the cursor is the greater of the head's claim_seq and the
 * lane's latest mark (the view awa.lane_cursors); maintenance folds marks into the heads.
 * Between installing the library and ALTER EXTENSION UPDATE the catalog is still 1.0: there
 * the head's claim_seq is the cursor and a claim updates it, as 1.0 did.
 */
#include "citus.hpp"
#include "claim_cursor.hpp"
#include "lane_lock.hpp"
#include "compat_1_0.hpp"
#include "pg_boundary.hpp"
#include "spi_util.hpp"

extern "C"
{
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
}

#include <cstdint>

namespace awa
{

namespace
{

SPIPlanPtr cursor_plans[2];

/* Where a heads read takes the lanes' cursors from (read_lane_heads). */
enum HeadsSource
{
	kHeadsLegacy, /* the 1.0 catalog: the head's claim_seq is the cursor */
	kHeadsView,	  /* claim marks, not preloaded: awa.lane_cursors */
	kHeadsBoard,  /* claim marks, preloaded: the heads and the cursor board */
	kHeadsSources
};

SPIPlanPtr heads_plans[kHeadsSources];

/*
 * OID of a lane's sequence by name; InvalidOid for a lane being dropped. A lane created
 * since this transaction's catalog snapshot (a wait that began before a producer's first job
 * in a new lane) is found after taking in the invalidations, which renew that snapshot: the
 * producer wakes sleepers only after it has sent them (wakeup.cpp).
 */
Oid
lane_sequence_oid(const char *seq_name, Oid awa_nsp)
{
	Oid seq_oid = get_relname_relid(seq_name, awa_nsp);

	if (!OidIsValid(seq_oid))
	{
		AcceptInvalidationMessages();
		seq_oid = get_relname_relid(seq_name, awa_nsp);
	}
	return seq_oid;
}
SPIPlanPtr lane_mark_plan = nullptr;

/*
 * Every lane head of the queue (none when it is paused): its cursor, the run_at hint the last
 * claim of the lane left, the lane's sequence, the plane's mode, the head row's version for
 * the cursor board and its last locker or updater: %s (the mode, kReceiptsSql), %s (h.xmin or
 * NULL), %s (h.xmax or NULL) and %s (the relation holding the cursors) depend on the
 * HeadsSource. Under Citus the mode is read by a statement of its own (kReceiptsSql): a
 * statement of a delegated call must not mix a reference table with the queue's tables.
 */
const char *const kHeadsSql =
	"SELECT h.priority, h.enqueue_shard, h.claim_seq, h.head_run_at, e.seq_name, "
	"  %s, %s, %s "
	"FROM %s h "
	"JOIN awa.queue_enqueue_heads e "
	"  ON e.queue = h.queue AND e.priority = h.priority AND e.enqueue_shard = h.enqueue_shard "
	"WHERE h.queue = $1 AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = $1 AND m.paused)";

/* The plane's mode (receipts or leases). */
const char *const kReceiptsSql = "SELECT s.receipts FROM awa.plane_settings s";
SPIPlanPtr receipts_plan = nullptr;

/* Result columns of kHeadsSql (SPI attribute numbers). */
enum HeadsColumn
{
	HC_PRIORITY = 1,
	HC_SHARD,
	HC_CLAIM_SEQ,
	HC_HINT,
	HC_SEQ_NAME,
	HC_RECEIPTS,
	HC_HEAD_XMIN,
	HC_HEAD_XMAX
};

/* A lane's latest claim mark: its cursor and hint, when the board knows nothing of it. */
const char *const kLaneMarkSql =
	"SELECT k.claim_seq, k.head_run_at FROM awa.claim_marks k "
	"WHERE k.queue = $1 AND k.priority = $2 AND k.enqueue_shard = $3 ORDER BY k.claim_seq DESC LIMIT 1";

/* Result columns of kLaneMarkSql. */
enum LaneMarkColumn
{
	MC_CLAIM_SEQ = 1,
	MC_HINT
};

/* Lanes the board holds (direct-mapped: a lane hashing to a taken slot replaces it). */
constexpr int kBoardSlots = 4096;

/* What the board knows of one lane. */
struct BoardEntry
{
	Oid dbid; /* InvalidOid: free */
	Oid seq_oid;
	TransactionId head_xmin;
	int64 claim_seq;
	bool has_run_at;
	TimestampTz run_at;
};

struct Board
{
	LWLock *lock;
	BoardEntry entries[kBoardSlots];
};

Board *board = nullptr;

/*
 * What this transaction will publish when (and if) it commits: the cursors its claims moved,
 * and anything it read once it had written a mark, since its reads see its own marks.
 */
struct PendingCursor
{
	Oid seq_oid;
	TransactionId head_xmin;
	int64 claim_seq;
	bool has_run_at;
	TimestampTz run_at;
	bool replace_hint;
	SubTransactionId subxact;
};

constexpr int kMaxPending = 16;
PendingCursor pending[kMaxPending];
int n_pending = 0;

/* This transaction has written a claim mark: its cursor reads are not committed state. */
bool marks_written_in_xact = false;

/* Keep a publication for the commit, tagged with the current subtransaction. */
void
queue_pending(Oid seq_oid, TransactionId head_xmin, int64 claim_seq, bool has_run_at, TimestampTz run_at,
			  bool replace_hint)
{
	PendingCursor next = {
		seq_oid, head_xmin, claim_seq, has_run_at, run_at, replace_hint, GetCurrentSubTransactionId()};

	for (int i = 0; i < n_pending; i++)
		if (pending[i].seq_oid == seq_oid && pending[i].subxact == next.subxact)
		{
			if (claim_seq > pending[i].claim_seq || (claim_seq == pending[i].claim_seq && replace_hint))
				pending[i] = next;
			return;
		}
	if (n_pending == kMaxPending)
		return; /* only a hint: a walk reads the mark instead */
	pending[n_pending++] = next;
}

/* The board slot of a lane. */
BoardEntry *
board_slot(Oid seq_oid)
{
	std::uint32_t h =
		(static_cast<std::uint32_t>(MyDatabaseId) * 2654435761u) ^ (static_cast<std::uint32_t>(seq_oid) * 40503u);

	return &board->entries[h % kBoardSlots];
}

/*
 * Put what is known of a lane on the board (exclusive lock held): an entry of the same lane
 * and head version only grows (a further cursor replaces it; the same cursor may add or
 * clear its hint); another lane's entry in the slot is replaced.
 */
void
board_put(Oid seq_oid, TransactionId head_xmin, int64 claim_seq, bool has_run_at, TimestampTz run_at, bool replace_hint)
{
	BoardEntry *e = board_slot(seq_oid);
	bool same = e->dbid == MyDatabaseId && e->seq_oid == seq_oid && e->head_xmin == head_xmin;

	if (same && e->claim_seq > claim_seq)
		return;
	if (same && e->claim_seq == claim_seq && !replace_hint && e->has_run_at)
		return;
	e->dbid = MyDatabaseId;
	e->seq_oid = seq_oid;
	e->head_xmin = head_xmin;
	e->claim_seq = claim_seq;
	e->has_run_at = has_run_at;
	e->run_at = run_at;
}

/* Transaction end: a commit publishes the cursors its claims moved; anything else forgets them. */
void
on_xact(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PREPARE)
		marks_written_in_xact = false;
	if (n_pending == 0)
		return;
	if ((event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT) && board != nullptr)
	{
		LWLockAcquire(board->lock, LW_EXCLUSIVE);
		for (int i = 0; i < n_pending; i++)
			board_put(pending[i].seq_oid, pending[i].head_xmin, pending[i].claim_seq, pending[i].has_run_at,
					  pending[i].run_at, pending[i].replace_hint);
		LWLockRelease(board->lock);
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PREPARE)
		n_pending = 0;
}

/* Subtransaction end: a rolled-back claim moved nothing; a committed one now belongs to the parent. */
void
on_subxact(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid, void *arg)
{
	int kept = 0;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	for (int i = 0; i < n_pending; i++)
	{
		if (pending[i].subxact == my_subid)
		{
			if (event == SUBXACT_EVENT_ABORT_SUB)
				continue;
			pending[i].subxact = parent_subid;
		}
		pending[kept++] = pending[i];
	}
	n_pending = kept;
}

/*
 * A lane's cursor and hint from the cursor board (preloaded, 1.1 catalogs). The head row
 * holds them as maintenance last folded them; the board's entry for this head version is
 * what the lane's claims published since (or a walk read), never behind the head. A lane the
 * board knows nothing of (the first walk after a fold or a restart, or its slot taken by
 * another lane) costs one read of its latest claim mark, which is then published.
 */
void
lane_from_board(text *queue, LaneHead *h)
{
	static const Oid types[3] = {TEXTOID, INT2OID, INT2OID};
	Datum values[3] = {PointerGetDatum(queue), Int16GetDatum(h->priority), Int16GetDatum(h->shard)};
	int64 claim_seq;
	bool has_run_at;
	TimestampTz run_at = 0;

	/*
	 * Once this transaction has written a claim mark the board, which it updates at commit,
	 * may be behind its own claims: it reads the lane's latest mark, which sees them.
	 */
	if (!marks_written_in_xact && board_lookup(h->seq_oid, h->head_xmin, &claim_seq, &has_run_at, &run_at) &&
		claim_seq >= h->claim_seq)
	{
		h->claim_seq = claim_seq;
		h->hint_null = !has_run_at;
		h->hint = run_at;
		return;
	}
	keep_plan(&lane_mark_plan, kLaneMarkSql, 3, types);
	exec_plan_latest(lane_mark_plan, values, nullptr, true, 1, SPI_OK_SELECT, "lane mark");
	if (SPI_processed == 1)
	{
		bool isnull;

		claim_seq = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, MC_CLAIM_SEQ, &isnull));
		if (claim_seq > h->claim_seq)
		{
			Datum hint = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, MC_HINT, &h->hint_null);

			h->claim_seq = claim_seq;
			h->hint = h->hint_null ? 0 : DatumGetTimestampTz(hint);
		}
	}
	board_publish(h->seq_oid, h->head_xmin, h->claim_seq, !h->hint_null, h->hint, false);
}

} // namespace

/*
 * Every lane head of an unpaused queue, with its cursor and hint as the catalog keeps them
 * (the 1.0 heads, awa.lane_cursors, or the heads and the cursor board), on the latest
 * committed state; SPI connected. Lanes being dropped are left out. *receipts: the plane's
 * mode (unset when the queue shows no lane). The array is palloc'd.
 */
int
read_lane_heads(text *queue, Catalog catalog, LaneHead **out, bool *receipts)
{
	static const Oid text_type[1] = {TEXTOID};
	Datum values[1] = {PointerGetDatum(queue)};
	HeadsSource source = catalog == Catalog::V1_0 ? kHeadsLegacy : cursor_board_available() ? kHeadsBoard : kHeadsView;
	Oid awa_nsp = get_namespace_oid("awa", false);
	SPITupleTable *rows;
	uint64 n_rows;
	LaneHead *heads;
	int n = 0;

	if (source == kHeadsBoard)
	{
		HeadRow *rows_direct;
		int n_direct;

		if (read_heads_direct(queue, &rows_direct, &n_direct, receipts))
		{
			*out = nullptr;
			if (n_direct == 0)
				return 0;
			heads = static_cast<LaneHead *>(palloc(sizeof(LaneHead) * n_direct));
			for (int i = 0; i < n_direct; i++)
			{
				LaneHead h;

				h.priority = rows_direct[i].priority;
				h.shard = rows_direct[i].shard;
				h.claim_seq = rows_direct[i].claim_seq;
				h.hint_null = rows_direct[i].hint_null;
				h.hint = rows_direct[i].hint;
				h.seq_oid = lane_sequence_oid(rows_direct[i].seq_name, awa_nsp);
				if (!OidIsValid(h.seq_oid))
					continue; /* a lane being dropped */
				h.head_xmin = rows_direct[i].xmin;
				h.head_xmax = rows_direct[i].xmax;
				heads[n++] = h;
			}
			for (int i = 0; i < n; i++)
				lane_from_board(queue, &heads[i]);
			*out = heads;
			return n;
		}
	}
	if (heads_plans[source] == nullptr)
	{
		char sql[1024];

		char receipts_sql[64];

		snprintf(receipts_sql, sizeof(receipts_sql), "(%s)", kReceiptsSql);
		snprintf(sql, sizeof(sql), kHeadsSql, citus_present() ? "NULL::boolean" : receipts_sql,
				 source == kHeadsBoard ? "h.xmin" : "NULL::xid", source == kHeadsView ? "NULL::xid" : "h.xmax",
				 source == kHeadsView	  ? cursor_relation()
				 : source == kHeadsLegacy ? compat_1_0::kCursorRelation
										  : "awa.queue_claim_heads");
		keep_plan(&heads_plans[source], sql, 1, text_type);
	}
	exec_plan_latest(heads_plans[source], values, nullptr, true, 0, SPI_OK_SELECT, "lane heads");
	n_rows = SPI_processed;
	rows = SPI_tuptable;
	*out = nullptr;
	if (n_rows == 0)
		return 0;
	{
		bool isnull;

		Datum mode;

		*receipts = DatumGetBool(SPI_getbinval(rows->vals[0], rows->tupdesc, HC_RECEIPTS, &isnull));
		if (isnull)
		{
			/* Under Citus: the mode from its own statement (rows stays valid until SPI_finish). */
			keep_plan(&receipts_plan, kReceiptsSql, 0, nullptr);
			exec_plan(receipts_plan, nullptr, nullptr, true, 1, SPI_OK_SELECT, "plane mode");
			*receipts = !spi_single_value(&mode) || DatumGetBool(mode);
		}
	}
	heads = static_cast<LaneHead *>(palloc(sizeof(LaneHead) * n_rows));
	for (uint64 i = 0; i < n_rows; i++)
	{
		HeapTuple tup = rows->vals[i];
		TupleDesc desc = rows->tupdesc;
		LaneHead h;
		Datum d;
		bool isnull;
		char *seq_name;

		h.priority = DatumGetInt16(SPI_getbinval(tup, desc, HC_PRIORITY, &isnull));
		h.shard = DatumGetInt16(SPI_getbinval(tup, desc, HC_SHARD, &isnull));
		h.claim_seq = DatumGetInt64(SPI_getbinval(tup, desc, HC_CLAIM_SEQ, &isnull));
		d = SPI_getbinval(tup, desc, HC_HINT, &h.hint_null);
		h.hint = h.hint_null ? 0 : DatumGetTimestampTz(d);
		seq_name = TextDatumGetCString(SPI_getbinval(tup, desc, HC_SEQ_NAME, &isnull));
		h.seq_oid = lane_sequence_oid(seq_name, awa_nsp);
		if (!OidIsValid(h.seq_oid))
			continue; /* a lane being dropped */
		d = SPI_getbinval(tup, desc, HC_HEAD_XMIN, &isnull);
		h.head_xmin = isnull ? InvalidTransactionId : DatumGetTransactionId(d);
		d = SPI_getbinval(tup, desc, HC_HEAD_XMAX, &isnull);
		h.head_xmax = isnull ? InvalidTransactionId : DatumGetTransactionId(d);
		heads[n++] = h;
	}
	/* After the loop: a board miss runs a statement, which replaces SPI_tuptable. */
	if (source == kHeadsBoard)
		for (int i = 0; i < n; i++)
			lane_from_board(queue, &heads[i]);
	*out = heads;
	return n;
}

/* shmem_request_hook: the cursor board's lock, and room for the board. */
void
cursor_board_shmem_request()
{
	RequestNamedLWLockTranche("awa_shard_cursors", 1);
	RequestAddinShmemSpace(sizeof(Board));
}

/* shmem_startup_hook: claim the cursor board by name (initialised once, by the postmaster). */
void
cursor_board_shmem_startup()
{
	bool found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	board = static_cast<Board *>(ShmemInitStruct("awa_shard cursor board", sizeof(Board), &found));
	if (!found)
	{
		board->lock = &(GetNamedLWLockTranche("awa_shard_cursors"))->lock;
		for (BoardEntry &e : board->entries)
			e.dbid = InvalidOid;
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Register the transaction hooks that publish claimed cursors at commit (preloaded only). */
void
init_cursor_board_hooks()
{
	RegisterXactCallback(on_xact, nullptr);
	RegisterSubXactCallback(on_subxact, nullptr);
}

/* Whether the cursor board exists (the library is preloaded). */
bool
cursor_board_available()
{
	return board != nullptr;
}

/* What the board knows of a lane at this head version; false when nothing. */
bool
board_lookup(Oid seq_oid, TransactionId head_xmin, int64 *claim_seq, bool *has_run_at, TimestampTz *run_at)
{
	BoardEntry *e;
	bool found = false;

	if (board == nullptr)
		return false;
	LWLockAcquire(board->lock, LW_SHARED);
	e = board_slot(seq_oid);
	if (e->dbid == MyDatabaseId && e->seq_oid == seq_oid && e->head_xmin == head_xmin)
	{
		found = true;
		*claim_seq = e->claim_seq;
		*has_run_at = e->has_run_at;
		*run_at = e->run_at;
	}
	LWLockRelease(board->lock);
	return found;
}

/*
 * Publish what a walk read of a lane on the latest committed state. With replace_hint, a
 * hint at the same cursor is replaced (a cleared hint clears the board's too). Once this
 * transaction has written a claim mark its reads also see its own marks, which a rollback
 * would take back: from then on it publishes only at commit.
 */
void
board_publish(Oid seq_oid, TransactionId head_xmin, int64 claim_seq, bool has_run_at, TimestampTz run_at,
			  bool replace_hint)
{
	if (board == nullptr)
		return;
	if (marks_written_in_xact)
	{
		queue_pending(seq_oid, head_xmin, claim_seq, has_run_at, run_at, replace_hint);
		return;
	}
	LWLockAcquire(board->lock, LW_EXCLUSIVE);
	board_put(seq_oid, head_xmin, claim_seq, has_run_at, run_at, replace_hint);
	LWLockRelease(board->lock);
}

/*
 * A claim of this (sub)transaction moved a lane's cursor and left a hint: publish both if
 * the transaction commits.
 */
void
board_publish_at_commit(Oid seq_oid, TransactionId head_xmin, int64 claim_seq, bool has_run_at, TimestampTz run_at)
{
	if (board == nullptr)
		return;
	marks_written_in_xact = true;
	queue_pending(seq_oid, head_xmin, claim_seq, has_run_at, run_at, false);
}

/*
 * Whether this database's catalog has claim marks (1.1 and later). One syscache look-up;
 * for the background worker only, which runs whichever catalog's maintenance functions are
 * installed. SQL entry points know their catalog from their symbol (catalog_version.hpp).
 */
bool
claim_marks_installed()
{
	Oid nsp = get_namespace_oid("awa", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid("claim_marks", nsp));
}

/* The relation that holds every lane's cursor (claim_seq) and run_at hint (head_run_at). */
const char *
cursor_relation()
{
	return "awa.lane_cursors";
}

/*
 * A lane's claim cursor on the latest committed state (SPI connected); false when the lane
 * has no head. Read after locking the head, it is exact: no claim can move it meanwhile, and
 * the claim that held the head before committed its mark before its lock was released.
 */
bool
lane_cursor(text *queue, int16 priority, int16 shard, Catalog catalog, int64 *cursor)
{
	static const Oid types[3] = {TEXTOID, INT2OID, INT2OID};
	Datum values[3] = {PointerGetDatum(queue), Int16GetDatum(priority), Int16GetDatum(shard)};
	Datum value;
	int v = static_cast<int>(catalog);
	bool found;

	if (catalog == Catalog::V1_1 && lane_cursor_direct(queue, priority, shard, &found, cursor))
		return found;
	if (cursor_plans[v] == nullptr)
	{
		char sql[512];

		if (catalog == Catalog::V1_1 && citus_present())
			/* awa.lane_cursors spelled out with the queue on each table: Citus routes a view's
			 * lateral join by its outer filter to every shard, this to the queue's alone. */
			snprintf(sql, sizeof(sql), "%s",
					 "SELECT greatest(h.claim_seq, (SELECT k.claim_seq FROM awa.claim_marks k "
					 "  WHERE k.queue = $1 AND k.priority = $2 AND k.enqueue_shard = $3 "
					 "  ORDER BY k.claim_seq DESC LIMIT 1)) "
					 "FROM awa.queue_claim_heads h WHERE h.queue = $1 AND h.priority = $2 AND h.enqueue_shard = $3");
		else
			snprintf(sql, sizeof(sql),
					 "SELECT h.claim_seq FROM %s h WHERE h.queue = $1 AND h.priority = $2 AND h.enqueue_shard = $3",
					 catalog == Catalog::V1_1 ? cursor_relation() : compat_1_0::kCursorRelation);
		keep_plan(&cursor_plans[v], sql, 3, types);
	}
	exec_plan_latest(cursor_plans[v], values, nullptr, true, 1, SPI_OK_SELECT, "lane cursor");
	if (!spi_single_value(&value))
		return false;
	*cursor = DatumGetInt64(value);
	return true;
}

} // namespace awa

/* awa._lane_cursor(queue, priority, shard): a lane's claim cursor on the latest committed state. */
AWA_SQL_FUNCTION(awa_lane_cursor)
{
	text *queue = PG_GETARG_TEXT_PP(0);
	int16 priority = PG_GETARG_INT16(1);
	int16 shard = PG_GETARG_INT16(2);
	int64 cursor = 0;
	bool found;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	found = awa::lane_cursor(queue, priority, shard, awa::Catalog::V1_1, &cursor);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_INT64(cursor);
}
