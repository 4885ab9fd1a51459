/*
 * defs.c — the memory tools as they are described to a model: name, title,
 * description and the JSON Schemas of their arguments and results. One
 * table for the MCP server (tools/list) and the agent's own model calls.
 */
#include "clawmem.h"

static const char search_desc[] =
    "Recall from the agent's long-term memory. Call it before answering anything that depends "
    "on earlier work, decisions, dates, people, preferences or to-dos. It searches MEMORY.md "
    "and the daily notes in memory/ (plus configured extra paths) and returns the best-matching "
    "snippets with their file path and line range; then use memory_get to read only the lines "
    "you need. Empty results mean nothing relevant was written down.";
static const char get_desc[] =
    "Read a memory file, or some of its lines, typically after memory_search pointed at it: "
    "MEMORY.md, memory.md, memory/YYYY-MM-DD.md or another .md file under memory/ or the "
    "configured extra paths (workspace-relative). `from` is the first line (1-based), `lines` "
    "how many. A file that does not exist yet, such as today's note before anything was "
    "written, returns empty text.";
static const char write_desc[] =
    "Write something down so that it outlives this session; memory is only what is on disk. "
    "Decisions, preferences and durable facts go to MEMORY.md (path \"MEMORY.md\"); day-to-day "
    "notes and running context go to today's daily note memory/YYYY-MM-DD.md (the default). "
    "When the user says \"remember this\", write it. Appends a paragraph, never rewrites what "
    "is there.";

static const char search_in[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"query\":{\"type\":\"string\",\"minLength\":1,\"description\":\"What to recall, in "
    "words likely to appear in the notes\"},"
    "\"maxResults\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000},"
    "\"minScore\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}},"
    "\"required\":[\"query\"]}";
static const char search_out[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"results\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\"},\"startLine\":{\"type\":\"integer\"},"
    "\"endLine\":{\"type\":\"integer\"},\"score\":{\"type\":\"number\"},"
    "\"snippet\":{\"type\":\"string\"},\"source\":{\"type\":\"string\"},"
    "\"citation\":{\"type\":\"string\"}},"
    "\"required\":[\"path\",\"startLine\",\"endLine\",\"score\",\"snippet\",\"source\"]}},"
    "\"provider\":{\"type\":\"string\"},\"model\":{\"type\":\"string\"},"
    "\"fallback\":{\"type\":\"string\"},\"citations\":{\"type\":\"string\"},"
    "\"disabled\":{\"type\":\"boolean\"},\"error\":{\"type\":\"string\"}},"
    "\"required\":[\"results\"]}";
static const char get_in[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"Workspace-relative, e.g. MEMORY.md or "
    "memory/2026-02-10.md\"},"
    "\"from\":{\"type\":\"integer\",\"minimum\":1},\"lines\":{\"type\":\"integer\",\"minimum\":1},"
    "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"Bytes into line `from` "
    "to start at: the nextOffset of a reply cut inside a long line\"}},"
    "\"required\":[\"path\"]}";
static const char get_out[] =
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
    "\"text\":{\"type\":\"string\"},\"truncated\":{\"type\":\"boolean\"},"
    "\"nextFrom\":{\"type\":\"integer\"},\"nextOffset\":{\"type\":\"integer\"}},"
    "\"required\":[\"path\",\"text\"]}";
static const char write_in[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"text\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The note, in Markdown\"},"
    "\"path\":{\"type\":\"string\",\"description\":\"MEMORY.md for durable facts; default: "
    "today's memory/YYYY-MM-DD.md\"}},\"required\":[\"text\"]}";
static const char write_out[] =
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
    "\"startLine\":{\"type\":\"integer\"},\"endLine\":{\"type\":\"integer\"},"
    "\"bytes\":{\"type\":\"integer\"}},\"required\":[\"path\",\"startLine\",\"endLine\"]}";

static const cm_tool_def defs[] = {
    {"memory_search", "Search memory", search_desc, search_in, search_out, 1},
    {"memory_get", "Read memory", get_desc, get_in, get_out, 1},
    {"memory_write", "Write memory", write_desc, write_in, write_out, 0},
};

const cm_tool_def *cm_tool_defs(size_t *n)
{
    *n = sizeof defs / sizeof defs[0];
    return defs;
}
