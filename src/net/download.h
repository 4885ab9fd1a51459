/*
 * download.h — local.modelPath resolution: a GGUF file path, or a Hugging Face
 * file "hf:<owner>/<repo>/<path>" fetched once into the model cache.
 *
 * URL: ${CLAWMEM_HF_ENDPOINT:-https://huggingface.co}/<owner>/<repo>/resolve/main/<path>
 * (each path segment percent-encoded), with "Authorization: Bearer $HF_TOKEN"
 * when HF_TOKEN is set; redirects (HF sends downloads to a CDN) are followed.
 *
 * Cache file: cache_dir/"hf-" + the percent-encoding of "<owner>/<repo>/<path>"
 * in which every byte but A-Z a-z 0-9 . _ - is written %XX (upper-case hex),
 * '/' included, e.g. hf:ggml-org/embeddinggemma-300m-qat-q8_0-GGUF/x.gguf →
 * "hf-ggml-org%2Fembeddinggemma-300m-qat-q8_0-GGUF%2Fx.gguf". The encoding is
 * one-to-one, so two specs never share a file. A name that would pass 240
 * bytes becomes "hf-<sha256 hex of owner/repo/path>-<encoded file name, last
 * 100 bytes>" (no "%2F" in it, so it cannot meet a name of the first kind).
 *
 * Download: into "<cache file>.part", under an flock on it (a second process
 * or thread wanting the same file waits, then finds it complete); a .part
 * left by an earlier attempt is resumed with "Range: bytes=N-". A cut
 * connection, a stall, 429 or 5xx is retried with backoff and resume
 * ($CLAWMEM_HTTP_BACKOFF_MS first delay, doubling to 30 s; gives up after 5
 * failures in a row that brought no new byte). The final size must equal the
 * total of Content-Range / Content-Length, and its sha256 the X-Linked-Etag
 * that Hugging Face's redirect announces for an LFS file (when one came; a
 * file that does not match is discarded); then the file is fsynced, renamed
 * into place and the directory fsynced.
 */
#ifndef CM_DOWNLOAD_H
#define CM_DOWNLOAD_H

#include "../base/common.h"

/* Called with bytes done and total (0 when unknown); nonzero cancels (CM_ECANCELED). */
typedef int (*dl_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* Resolves local.modelPath. A file path is returned as is after '~/' expansion.
 * "hf:<owner>/<repo>/<path>" maps to a file in cache_dir; when it is missing and
 * fetch is true it is downloaded first; when fetch is false CM_ENOTFOUND.
 * *path_out receives a new string (free()). Errors name the URL (never a token) and why.
 *
 * Return codes: CM_OK; CM_EINVAL for a malformed "hf:" spec or no cache_dir;
 * CM_ENOTFOUND (fetch false, not downloaded); CM_ECANCELED when progress
 * returned nonzero (while downloading or while waiting for another download;
 * the .part is kept); CM_EIO for any download failure — HTTP errors (401/403
 * hint at HF_TOKEN, 404 at the spec; neither is retried), network failures
 * after the retries, a size mismatch, file-system errors. A .part holding
 * bytes is kept for the next call to resume; an empty one is removed, and no
 * final file exists after a failure. progress is called at most ~10 times a
 * second, from the calling thread; while another download of the same file
 * runs, done is the size of its .part. '~/' in cache_dir is expanded.
 * Thread-safe; blocks for the whole download.
 *
 * A download that fails without bringing a byte (no network, refused, an HTTP
 * error) is remembered in "<cache file>.failed" (JSON: "time" in unix ms,
 * "failures" in a row, "reason"); until 60 s × 2^(failures-1) (at most 1 h)
 * have passed, calls fail at once with CM_EIO and a message giving the reason
 * and when the next attempt is due, whatever fetch says, and make no request.
 * A successful download removes the record. */
cm_rc cm_net_model_resolve(const char *spec, const char *cache_dir, bool fetch,
                           dl_progress_fn progress, void *ctx, char **path_out, char *err,
                           size_t errlen);

/* cm_net_model_resolve with the current time given (unix ms; 0: the clock's), for
 * the failure backoff. */
cm_rc cm_net_model_resolve_at(const char *spec, const char *cache_dir, bool fetch, int64_t now_ms,
                              dl_progress_fn progress, void *ctx, char **path_out, char *err,
                              size_t errlen);

#endif
