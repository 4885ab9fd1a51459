/*
 * clawmem/agents.h — the agents whose memory an index holds, as a whole:
 * which there are (those of the config and any other with rows in the
 * store), and the removal of everything one agent has in the store.
 * Included by clawmem.h. JSON results are freed with cm_free.
 */
#ifndef CLAWMEM_AGENTS_H
#define CLAWMEM_AGENTS_H

#ifdef __cplusplus
extern "C" {
#endif

/* The config's agents (agents.list[].id, else the default agent) and every
 * other agent the stores they use hold: rows of a PostgreSQL database, or
 * index files <id>.clawmem.sqlite beside the default agent's at the default
 * place. *json:
 *   {"agents":[{"id","configured":bool,"store":"sqlite"|"postgres",
 *               "index": path | "postgres" | null (none yet),
 *               "rows":{table: n, ...}}, ...]}   sorted by id
 * A PostgreSQL DSN never appears in it. opt as for cm_engine_open (its
 * agent_id only picks the default agent's overrides). */
cm_rc cm_agents_list(const cm_options *opt, char **json, char *err, size_t errlen);

/* Removes every row opt->agent_id has in its store: on PostgreSQL each
 * clawmem_* table's rows of that agent in one transaction under the agent's
 * write lock; on SQLite its index file with -wal, -shm, the lock and
 * watcher files and leftover rebuilds. The memory files, the sessions and
 * every other agent's rows are untouched. CM_EBUSY while a watcher in this
 * state dir keeps the index. *json:
 *   {"agent","store","found":bool,"removed":{table: rows, ...},"paths":[removed files]}
 * (paths: SQLite only). */
cm_rc cm_agents_delete(const cm_options *opt, char **json, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
