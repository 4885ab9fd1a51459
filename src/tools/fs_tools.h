/*
 * fs_tools.h — the agent's file tools `read`, `write` and `edit`, with the
 * names, parameters, result texts and limits of QuantumClaw 2026.3.22 (its
 * pi-coding-agent tools), confined to the agent's workspace: a path is
 * checked once lexically (relative to the workspace, or absolute inside it;
 * a leading "@" dropped, "~/" expanded) and then reached only through
 * descriptors beneath the workspace, no symbolic link followed (base/path.h);
 * writes replace the file atomically (base/replace.h). The reference confines
 * these tools only when `tools.fs.workspaceOnly` is true; clawmem always
 * does (docs/tools.md says why).
 */
#ifndef CM_FS_TOOLS_H
#define CM_FS_TOOLS_H

#include <jansson.h>

#include "../base/buf.h"
#include "clawmem.h"

/* read's output limits, as the reference's (2,000 lines or 50 KB). */
#define FS_READ_MAX_LINES 2000
#define FS_READ_MAX_BYTES (50 * 1024)
/* write's and edit's file size cap (the reference has none). */
#define FS_WRITE_MAX_BYTES (16u << 20)

/* Each runs the tool on args ({path, offset?, limit?} / {path, content} /
 * {path, oldText, newText}) for the workspace directory `workspace`
 * (absolute) and appends the result text to out; on failure err holds the
 * text the model is shown (an error result), never a path outside the
 * workspace. */
cm_rc cm_tool_read(const char *workspace, const json_t *args, buf *out, char *err, size_t errlen);
cm_rc cm_tool_write(const char *workspace, const json_t *args, buf *out, char *err, size_t errlen);
cm_rc cm_tool_edit(const char *workspace, const json_t *args, buf *out, char *err, size_t errlen);

/* The workspace-relative, normalised name of path (as the tools resolve it)
 * into rel; CM_EPATH with a message when it is empty, holds a NUL, is not
 * UTF-8 or leaves the workspace. */
cm_rc cm_tool_fs_resolve(const char *workspace, const char *path, buf *rel, char *err,
                         size_t errlen);

/* read, edit and write as the model is told of them (the reference's order),
 * read_only 0 for those that write. */
const cm_tool_def *cm_tool_fs_defs(size_t *n);

#endif
