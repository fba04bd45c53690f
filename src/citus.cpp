/*
 * citus.cpp — scale-out by queue on Citus (docs/scale-out.md). A queue's rows live on one
 * worker (awa.citus_setup() distributes the per-queue tables by queue, colocated, and the
 * worker-facing calls by p_queue with force_delegation). A call Citus did not delegate would
 * run its statements from the coordinator, one routed statement at a time, and could split
 * a lane over nodes: every entry point that takes a queue refuses it here, before it touches
 * anything, unless the queue's shard is on this node.
 */
#include "citus.hpp"
#include "relcache_watch.hpp"
#include "statement_settings.hpp"
#include "pg_boundary.hpp"
#include "spi_util.hpp"
#include "validate.hpp"

extern "C"
{
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/memutils.h"
}

namespace awa
{

namespace
{

/* -1 unknown, 0 no, 1 yes: Citus's library is loaded into this backend. */
int citus_loaded = -1;
/* Whether the citus extension exists (looked up until found; then kept). */
bool citus_extension = false;
SPIPlanPtr local_plan = nullptr;

SPIPlanPtr shards_plan = nullptr;

/* A plan of a statement on the shards of one queue. */
struct ShardPlan
{
	const char *sql; /* the statement as written (its address is the key) */
	char *queue;	 /* TopMemoryContext */
	int64 shard;	 /* the queue's shard of awa.queue_meta when the plan was made */
	SPIPlanPtr plan;
};
constexpr int kShardPlans = 64;
ShardPlan shard_plans[kShardPlans];
int next_victim = 0;

/* Whether `c` can continue an SQL identifier. */
bool
ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
}

/* Whether the word at `p` (lower case) is one that may follow a FROM item, not an alias. */
bool
clause_word(const char *p)
{
	static const char *const words[] = {"where",   "join",	"left",	  "right",	   "inner",	 "full",   "cross",
										"natural", "on",	"using",  "group",	   "order",	 "limit",  "offset",
										"fetch",   "union", "except", "intersect", "having", "window", "for"};
	for (const char *w : words)
	{
		size_t len = strlen(w);

		if (pg_strncasecmp(p, w, len) == 0 && !ident_char(p[len]))
			return true;
	}
	return false;
}

/* A view of awa: its qualified name, its name, and its definition. */
struct AwaView
{
	char *name;
	char *relname;
	char *definition;
};

/*
 * The views of awa, read once per backend: pg_get_viewdef deparses each view, about 20 ms for
 * all of them, which a read of one queue's jobs on a worker paid on every call. A relcache
 * invalidation of a view, of a relation a view reads, or of every relation forgets them.
 */
MemoryContext views_cxt = nullptr;
AwaView *views = nullptr;
int n_views = -1;	  /* -1: not read */
int n_views_once = 0; /* how many were read by a read that an invalidation overtook */
Oid *view_relations = nullptr;
int n_view_relations = 0;
uint64 views_invalidations = 0;
bool views_callback_registered = false;

/* A relcache invalidation: forget the views when it may concern them. */
void
on_views_relcache_inval(Datum arg, Oid relid)
{
	bool hit = !OidIsValid(relid);

	views_invalidations++;
	for (int i = 0; i < n_view_relations && !hit; i++)
		hit = view_relations[i] == relid;
	if (hit)
		n_views = -1;
}

/* Read the views of awa and the relations they read into the backend's memory (SPI connected). */
void
read_views()
{
	static SPIPlanPtr views_plan = nullptr;
	static SPIPlanPtr relations_plan = nullptr;
	uint64 seen = views_invalidations;
	int n;
	bool isnull;

	if (!views_callback_registered)
	{
		watch_relcache(on_views_relcache_inval);
		views_callback_registered = true;
	}
	n_view_relations = 0;
	if (views_cxt == nullptr)
		views_cxt = AllocSetContextCreate(TopMemoryContext, "awa views", ALLOCSET_SMALL_SIZES);
	else
		MemoryContextReset(views_cxt);
	keep_plan(&views_plan,
			  "SELECT c.oid::pg_catalog.regclass::pg_catalog.text, c.relname::pg_catalog.text, "
			  "       pg_catalog.rtrim(pg_catalog.pg_get_viewdef(c.oid), '; ') "
			  "FROM pg_catalog.pg_class c "
			  "WHERE c.relnamespace = 'awa'::pg_catalog.regnamespace AND c.relkind = 'v'",
			  0, nullptr);
	exec_plan(views_plan, nullptr, nullptr, true, 0, SPI_OK_SELECT, "views of awa");
	n = static_cast<int>(SPI_processed);
	views = static_cast<AwaView *>(MemoryContextAlloc(views_cxt, sizeof(AwaView) * (n + 1)));
	for (int i = 0; i < n; i++)
	{
		views[i].name = MemoryContextStrdup(views_cxt, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		views[i].relname =
			MemoryContextStrdup(views_cxt, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
		views[i].definition =
			MemoryContextStrdup(views_cxt, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3));
	}
	/* The views themselves and every relation their rules read. */
	keep_plan(&relations_plan,
			  "SELECT c.oid FROM pg_catalog.pg_class c "
			  "WHERE c.relnamespace = 'awa'::pg_catalog.regnamespace AND c.relkind = 'v' "
			  "UNION SELECT d.refobjid FROM pg_catalog.pg_class c "
			  "JOIN pg_catalog.pg_rewrite r ON r.ev_class = c.oid "
			  "JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
			  "     AND d.objid = r.oid AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass "
			  "WHERE c.relnamespace = 'awa'::pg_catalog.regnamespace AND c.relkind = 'v'",
			  0, nullptr);
	exec_plan(relations_plan, nullptr, nullptr, true, 0, SPI_OK_SELECT, "relations the views of awa read");
	view_relations = static_cast<Oid *>(MemoryContextAlloc(views_cxt, sizeof(Oid) * (SPI_processed + 1)));
	for (uint64 i = 0; i < SPI_processed; i++)
		view_relations[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
	n_view_relations = static_cast<int>(SPI_processed);
	/* An invalidation taken while they were read: use them this once, read them again next time. */
	n_views = views_invalidations == seen ? n : -1;
	if (n_views < 0)
		n_views_once = n;
}

/*
 * `sql` with every view of awa it names (awa.jobs, awa.lane_cursors, and the views those
 * read) replaced by its definition as a subquery, aliased by the view's name where the
 * statement gave it no alias, so that the tables the views read can be named by their
 * shards. At most four levels of views. SPI connected.
 */
char *
expand_views(const char *sql)
{
	char *cur = pstrdup(sql);
	int n;

	if (n_views < 0)
		read_views();
	n = n_views >= 0 ? n_views : n_views_once;
	for (int level = 0; level < 4; level++)
	{
		StringInfoData out;
		bool any = false;

		initStringInfo(&out);
		for (const char *p = cur; *p;)
		{
			bool replaced = false;

			if ((p == cur || !ident_char(p[-1])) && strncmp(p, "awa.", 4) == 0)
				for (int i = 0; i < n && !replaced; i++)
				{
					size_t len = strlen(views[i].name);
					const char *next;

					if (strncmp(p, views[i].name, len) != 0 || ident_char(p[len]))
						continue;
					appendStringInfo(&out, "(%s)", views[i].definition);
					p += len;
					for (next = p; *next == ' ' || *next == '\n' || *next == '\t'; next++)
						;
					/* No alias follows (a clause, a comma, a parenthesis, the end): give one. */
					if (!(ident_char(*next) || *next == '"') || clause_word(next))
						appendStringInfo(&out, " %s", quote_identifier(views[i].relname));
					replaced = any = true;
				}
			if (!replaced)
				appendStringInfoChar(&out, *p++);
		}
		cur = out.data;
		if (!any)
			break;
	}
	return cur;
}

/*
 * `sql` (its views expanded) with every distributed table of awa named as the rows of the last
 * SPI result say: column 1 a table, column 2 the shard to name it by.
 */
char *
name_shards(const char *sql)
{
	uint64 n = SPI_processed;
	StringInfoData out;

	initStringInfo(&out);
	for (const char *p = sql; *p;)
	{
		bool replaced = false;

		if ((p == sql || !ident_char(p[-1])) && strncmp(p, "awa.", 4) == 0)
			for (uint64 i = 0; i < n && !replaced; i++)
			{
				char *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
				size_t len = strlen(name);

				if (strncmp(p, name, len) == 0 && !ident_char(p[len]))
				{
					appendStringInfoString(&out, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
					p += len;
					replaced = true;
				}
			}
		if (!replaced)
			appendStringInfoChar(&out, *p++);
	}
	return out.data;
}

/* The hash-distributed tables of awa (parents, not their partitions), for the plans below. */
#define AWA_DISTRIBUTED_PARENTS                                                                                        \
	"p.partmethod = 'h' AND p.logicalrelid::pg_catalog.regclass::pg_catalog.text LIKE 'awa.%' "                        \
	"AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhrelid = p.logicalrelid)"

/*
 * `sql` with its views of awa expanded (expand_views) and every distributed table of awa
 * (parents, not their partitions) named by its shard holding the queue; nullptr when none is
 * distributed. SPI connected.
 */
char *
shard_sql(const char *sql, text *queue)
{
	Oid argtypes[1] = {TEXTOID};
	Datum values[1] = {PointerGetDatum(queue)};

	sql = expand_views(sql);
	keep_plan(&shards_plan,
			  "SELECT p.logicalrelid::pg_catalog.regclass::pg_catalog.text, "
			  "       pg_catalog.shard_name(p.logicalrelid, "
			  "                             pg_catalog.get_shard_id_for_distribution_column(p.logicalrelid, $1)) "
			  "FROM pg_catalog.pg_dist_partition p WHERE " AWA_DISTRIBUTED_PARENTS,
			  1, argtypes);
	exec_plan(shards_plan, values, nullptr, true, 0, SPI_OK_SELECT, "shards of a queue");
	if (SPI_processed == 0)
		return nullptr;
	return name_shards(sql);
}

/*
 * `sql` once for every group of colocated shards placed on this node: its views expanded and
 * every distributed table of awa named by its shard of that group (the shards whose hash
 * range is that of one of this node's shards of awa.queue_meta). An empty list on a node
 * without shards. SPI connected.
 */
List *
local_shard_group_sqls(const char *sql)
{
	static SPIPlanPtr anchors_plan = nullptr;
	static SPIPlanPtr group_plan = nullptr;
	Oid argtypes[1] = {INT8OID};
	int64 *anchors;
	uint64 n;
	List *out = NIL;

	sql = expand_views(sql);
	keep_plan(&anchors_plan,
			  "SELECT s.shardid FROM pg_catalog.pg_dist_shard s "
			  "JOIN pg_catalog.pg_dist_placement pl ON pl.shardid = s.shardid "
			  "JOIN pg_catalog.pg_dist_local_group g ON g.groupid = pl.groupid "
			  "WHERE s.logicalrelid = 'awa.queue_meta'::pg_catalog.regclass ORDER BY s.shardid",
			  0, nullptr);
	exec_plan(anchors_plan, nullptr, nullptr, true, 0, SPI_OK_SELECT, "local shards");
	n = SPI_processed;
	anchors = static_cast<int64 *>(palloc(sizeof(int64) * (n + 1)));
	for (uint64 i = 0; i < n; i++)
	{
		bool isnull;

		anchors[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
	}
	keep_plan(&group_plan,
			  "SELECT p.logicalrelid::pg_catalog.regclass::pg_catalog.text, "
			  "       pg_catalog.shard_name(p.logicalrelid, s.shardid) "
			  "FROM pg_catalog.pg_dist_partition p "
			  "JOIN pg_catalog.pg_dist_shard s ON s.logicalrelid = p.logicalrelid "
			  "JOIN pg_catalog.pg_dist_shard a ON a.shardid = $1 AND a.shardminvalue = s.shardminvalue "
			  "WHERE " AWA_DISTRIBUTED_PARENTS,
			  1, argtypes);
	for (uint64 i = 0; i < n; i++)
	{
		Datum values[1] = {Int64GetDatum(anchors[i])};

		exec_plan(group_plan, values, nullptr, true, 0, SPI_OK_SELECT, "shards of a group");
		out = lappend(out, name_shards(sql));
	}
	return out;
}

} // namespace

/*
 * The queue's shard of awa.queue_meta now (a split gives the queue a new shard, whose
 * colocated shards are then the ones to name); 0 when not distributed. SPI connected.
 */
int64
queue_shard_id(text *queue)
{
	static SPIPlanPtr shard_plan = nullptr;
	Oid argtypes[1] = {TEXTOID};
	Datum values[1] = {PointerGetDatum(queue)};
	Datum result;

	keep_plan(&shard_plan,
			  "SELECT pg_catalog.get_shard_id_for_distribution_column('awa.queue_meta'::pg_catalog.regclass, $1) "
			  "WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition "
			  "              WHERE logicalrelid = 'awa.queue_meta'::pg_catalog.regclass)",
			  1, argtypes);
	exec_plan(shard_plan, values, nullptr, true, 1, SPI_OK_SELECT, "shard of a queue");
	return spi_single_value(&result) ? DatumGetInt64(result) : 0;
}

/*
 * A kept plan of sql on the queue's shards (see citus.hpp); nullptr when not distributed.
 * A kept plan is used only while the queue's shard is the one it was made for: after a
 * shard split the old shards still exist until Citus drops them, and a plan naming them
 * would read and write rows no longer the queue's.
 */
SPIPlanPtr
keep_shard_plan(const char *sql, text *queue, int nargs, const Oid *argtypes)
{
	char *q = text_to_cstring(queue);
	char *rewritten;
	SPIPlanPtr plan;
	ShardPlan *slot = nullptr;
	int64 shard;

	/* The caller's last result stays its last result (the look-ups below run statements). */
	SPITupleTable *caller_tuptable = SPI_tuptable;
	uint64 caller_processed = SPI_processed;

	if (!citus_present())
		return nullptr;
	shard = queue_shard_id(queue);
	for (auto &e : shard_plans)
		if (e.sql == sql && e.queue != nullptr && strcmp(e.queue, q) == 0)
		{
			if (e.shard == shard)
			{
				SPI_tuptable = caller_tuptable;
				SPI_processed = caller_processed;
				return e.plan;
			}
			slot = &e; /* made for another shard: made again in its place */
			break;
		}
	rewritten = shard_sql(sql, queue);
	SPI_tuptable = caller_tuptable;
	SPI_processed = caller_processed;
	if (rewritten == nullptr)
		return nullptr;
	pin_statement_settings();
	plan = SPI_prepare(rewritten, nargs, const_cast<Oid *>(argtypes));
	if (plan == nullptr)
		elog(ERROR, "awa_shard: SPI_prepare failed (%s) for: %s", SPI_result_code_string(SPI_result), rewritten);
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "awa_shard: SPI_keepplan failed");
	if (slot == nullptr)
	{
		slot = &shard_plans[next_victim];
		next_victim = (next_victim + 1) % kShardPlans;
	}
	if (slot->plan != nullptr)
		SPI_freeplan(slot->plan);
	if (slot->queue != nullptr)
		pfree(slot->queue);
	slot->sql = sql;
	slot->queue = MemoryContextStrdup(TopMemoryContext, q);
	slot->shard = shard;
	slot->plan = plan;
	return plan;
}

/* Citus is loaded (its settings exist: it is preloaded) and CREATE EXTENSION citus ran here. */
bool
citus_present()
{
	if (citus_loaded < 0)
		citus_loaded = GetConfigOption("citus.node_conninfo", true, false) != nullptr ? 1 : 0;
	if (citus_loaded == 0)
		return false;
	if (!citus_extension && IsTransactionState())
		citus_extension = OidIsValid(get_extension_oid("citus", true));
	return citus_extension;
}

/* require_queue_local, and under Citus once distributed a NULL queue refused (0A000). */
void
require_queue_local_or_given(text *queue)
{
	static SPIPlanPtr distributed_plan = nullptr;
	Datum result;
	bool distributed;

	if (!citus_present())
		return;
	if (queue != nullptr)
	{
		require_queue_local(VARDATA_ANY(queue), VARSIZE_ANY_EXHDR(queue));
		return;
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	keep_plan(&distributed_plan,
			  "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition "
			  "               WHERE logicalrelid = 'awa.queue_meta'::pg_catalog.regclass)",
			  0, nullptr);
	exec_plan(distributed_plan, nullptr, nullptr, true, 1, SPI_OK_SELECT, "distribution");
	distributed = spi_single_value(&result) && DatumGetBool(result);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	if (distributed)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("on a Citus cluster this call needs p_queue"),
						errdetail("Without the queue, Citus cannot send the call to the queue's worker."),
						errhint("Pass the job's queue as p_queue, alone in its statement.")));
}

/* The queue's shard of awa.queue_enqueue_heads by name, nullptr when not distributed (see citus.hpp). */
char *
queue_heads_shard_name(text *queue)
{
	static SPIPlanPtr name_plan = nullptr;
	Oid argtypes[1] = {TEXTOID};
	Datum values[1] = {PointerGetDatum(queue)};

	if (!citus_present())
		return nullptr;
	keep_plan(&name_plan,
			  "SELECT pg_catalog.shard_name(p.logicalrelid, "
			  "                             pg_catalog.get_shard_id_for_distribution_column(p.logicalrelid, $1)) "
			  "FROM pg_catalog.pg_dist_partition p "
			  "WHERE p.logicalrelid = 'awa.queue_enqueue_heads'::pg_catalog.regclass",
			  1, argtypes);
	exec_plan(name_plan, values, nullptr, true, 1, SPI_OK_SELECT, "shard of a queue's lane heads");
	if (SPI_processed == 0)
		return nullptr;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/* This node's Citus group once awa.queue_meta is distributed; -1 otherwise (see citus.hpp). */
int
citus_group()
{
	static SPIPlanPtr group_plan = nullptr;
	Datum result;
	int group = -1;

	if (!citus_present())
		return -1;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	keep_plan(&group_plan,
			  "SELECT g.groupid FROM pg_catalog.pg_dist_local_group g "
			  "WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition "
			  "              WHERE logicalrelid = 'awa.queue_meta'::pg_catalog.regclass)",
			  0, nullptr);
	exec_plan(group_plan, nullptr, nullptr, true, 1, SPI_OK_SELECT, "citus group");
	if (spi_single_value(&result))
		group = DatumGetInt32(result);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	return group;
}

/* Whether awa.citus_setup() has distributed the install and the queue's shard is on this node. */
bool
queue_shard_here(text *queue)
{
	static SPIPlanPtr here_plan = nullptr;
	Oid argtypes[1] = {TEXTOID};
	Datum values[1] = {PointerGetDatum(queue)};
	Datum result;
	bool here;

	if (!citus_present())
		return false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	keep_plan(&here_plan,
			  "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition "
			  "               WHERE logicalrelid = 'awa.queue_meta'::pg_catalog.regclass) "
			  "   AND EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement p, pg_catalog.pg_dist_local_group g "
			  "                WHERE p.groupid = g.groupid "
			  "                  AND p.shardid = pg_catalog.get_shard_id_for_distribution_column("
			  "                                    'awa.queue_meta'::pg_catalog.regclass, $1))",
			  1, argtypes);
	exec_plan(here_plan, values, nullptr, true, 1, SPI_OK_SELECT, "queue placement");
	here = spi_single_value(&result) && DatumGetBool(result);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	return here;
}

namespace
{

/*
 * Take Citus's lock on a shard's placement metadata in `mode` (ShareLock: as Citus's own
 * writes hold it), to the end of the transaction, through Citus's own lock_shard_metadata so
 * that the lock is the one its moves and splits take: exclusively, on every node, for every
 * shard of the colocation group, for as long as they copy (its tag names the colocation group
 * and the shard's index, not the shard id). SPI connected.
 */
void
lock_shard_metadata(int64 shard_id, LOCKMODE mode)
{
	static SPIPlanPtr lock_plan = nullptr;
	Oid argtypes[2] = {INT4OID, INT8OID};
	Datum values[2] = {Int32GetDatum(mode), Int64GetDatum(shard_id)};

	keep_plan(&lock_plan, "SELECT pg_catalog.lock_shard_metadata($1, ARRAY[$2])", 2, argtypes);
	exec_plan(lock_plan, values, nullptr, false, 1, SPI_OK_SELECT, "shard metadata lock");
}

} // namespace

/*
 * Under Citus, once distributed: hold the queue's shard in place until this transaction ends
 * (its placement metadata lock, shared, as Citus's own writes hold it), then refuse the call
 * unless that shard is on this node (see citus.hpp). A move or split of the queue's shards
 * waits for the calls in progress and holds new ones off until it has copied; a call that
 * waited then reads where the shard is now (the latest committed state), so a call routed
 * here before a move is refused (retryable: a new call is routed to the new node) instead of
 * writing to the shard the move left behind.
 */
void
require_queue_local(const char *queue, int queue_len)
{
	Oid argtypes[1] = {TEXTOID};
	Datum values[1];
	Datum result;
	bool local;
	int64 shard_id;

	if (!citus_present())
		return;
	values[0] = PointerGetDatum(cstring_to_text_with_len(queue, queue_len));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	/* Not distributed yet (awa.citus_setup() not run): one node, nothing to refuse. */
	shard_id = queue_shard_id(DatumGetTextPP(values[0]));
	if (shard_id != 0)
		for (;;)
		{
			int64 now;

			lock_shard_metadata(shard_id, ShareLock);
			/* An advisory lock takes no invalidations: Citus's metadata cache may be older than the wait. */
			AcceptInvalidationMessages();
			now = queue_shard_id(DatumGetTextPP(values[0]));
			if (now == shard_id)
				break;
			shard_id = now; /* split meanwhile: hold the queue's new shard too */
		}
	keep_plan(&local_plan,
			  "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition "
			  "                              WHERE logicalrelid = 'awa.queue_meta'::pg_catalog.regclass) "
			  "            THEN true "
			  "            ELSE EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement p, pg_catalog.pg_dist_local_group g "
			  "                          WHERE p.groupid = g.groupid "
			  "                            AND p.shardid = pg_catalog.get_shard_id_for_distribution_column("
			  "                                              'awa.queue_meta'::pg_catalog.regclass, $1)) END",
			  1, argtypes);
	exec_plan_latest(local_plan, values, nullptr, true, 1, SPI_OK_SELECT, "queue placement");
	local = spi_single_value(&result) && DatumGetBool(result);
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	if (!local)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						errmsg("queue \"%.*s\" lives on another node of the Citus cluster", queue_len, queue),
						errdetail("Citus did not delegate this call to the queue's worker, so it would run here, a "
								  "statement at a time; or the queue's shards moved while the call waited."),
						errhint("Call the function alone in its own statement with p_queue given (SELECT awa.f(...), "
								"not inside an expression or a multi-statement transaction that touched another "
								"queue's worker), or connect to the queue's worker; after a shard move, retry.")));
}

} // namespace awa

/*
 * awa._citus_group() -> integer: this node's Citus group (0: the coordinator) once
 * awa.citus_setup() has distributed the install, NULL otherwise (no Citus, or not set up):
 * maintenance asks it to choose between the one-server pass and a pass for this node's
 * queues (docs/scale-out.md, "Maintenance").
 */
AWA_SQL_FUNCTION(awa_citus_group)
{
	int group = awa::citus_group();

	if (group < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32(group);
}

/*
 * awa._require_queue_local(queue) -> void: the refusal of the C++ entry points
 * (require_queue_local_or_given) for a PL/pgSQL call that takes p_queue: under Citus, once
 * distributed, 0A000 with a hint unless the queue is given and its shard is on this node;
 * nothing else without Citus (the queue may then be NULL: a call by id alone). A queue given
 * is checked as every queue argument is (23514: empty or longer than 200 characters).
 */
AWA_SQL_FUNCTION(awa_require_queue_local)
{
	Datum queue = awa::optional_queue_arg(fcinfo, 0, "p_queue");

	awa::require_queue_local_or_given(queue != (Datum)0 ? DatumGetTextPP(queue) : nullptr);
	PG_RETURN_VOID();
}

/*
 * awa._queue_shard_sql(sql, queue) -> text: for a PL/pgSQL read of one queue (get_job,
 * list_jobs), the statement with the views of awa it names expanded and every distributed
 * table named by its shard holding the queue, when awa.citus_setup() has distributed the
 * install and that shard is on this node (the call was delegated here): run with EXECUTE,
 * it reads this node's shards only, where Citus would send the view's statement to every
 * shard. NULL otherwise (no Citus, not set up, or the queue lives elsewhere): the caller then
 * runs its statement as written.
 */
AWA_SQL_FUNCTION(awa_queue_shard_sql)
{
	MemoryContext caller = CurrentMemoryContext;
	text *result = nullptr;
	char *rewritten;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || !awa::queue_shard_here(PG_GETARG_TEXT_PP(1)))
		PG_RETURN_NULL();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	rewritten = awa::shard_sql(text_to_cstring(PG_GETARG_TEXT_PP(0)), PG_GETARG_TEXT_PP(1));
	if (rewritten != nullptr)
	{
		MemoryContext spi = MemoryContextSwitchTo(caller);

		result = cstring_to_text(rewritten);
		MemoryContextSwitchTo(spi);
	}
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	if (result == nullptr)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(result);
}

/*
 * awa._local_shard_sqls(sql) -> text[]: `sql` once for every group of colocated shards on this
 * node, its views of awa expanded and every distributed table named by its shard of the
 * group (local_shard_group_sqls). Maintenance of this node's own shards EXECUTEs each, so
 * that nothing of it leaves the node: the worker's part of a ring slot's prune on a Citus
 * cluster. An empty array without shards here; NULL without Citus or before
 * awa.citus_setup().
 */
AWA_SQL_FUNCTION(awa_local_shard_sqls)
{
	MemoryContext caller = CurrentMemoryContext;
	ArrayType *result = nullptr;

	if (PG_ARGISNULL(0) || awa::citus_group() < 0)
		PG_RETURN_NULL();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "awa_shard: SPI_connect failed");
	{
		List *sqls = awa::local_shard_group_sqls(text_to_cstring(PG_GETARG_TEXT_PP(0)));
		MemoryContext spi = MemoryContextSwitchTo(caller);
		Datum *elems = static_cast<Datum *>(palloc(sizeof(Datum) * (list_length(sqls) + 1)));
		int n = 0;
		ListCell *lc;

		foreach (lc, sqls)
			elems[n++] = PointerGetDatum(cstring_to_text(static_cast<char *>(lfirst(lc))));
		result = construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT);
		MemoryContextSwitchTo(spi);
	}
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "awa_shard: SPI_finish failed");
	PG_RETURN_ARRAYTYPE_P(result);
}
