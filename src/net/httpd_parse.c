/*
 * httpd_parse.c — the request side of httpd.c's HTTP/1.1 server (contracts
 * in httpd_parse.h): where a request head ends, the head parsed in place with
 * RFC 9112's rules (token characters, no obsolete line folding, one
 * Content-Length, no Transfer-Encoding, Host required in HTTP/1.1), and the
 * reason phrases of the status codes it answers.
 */
#include "httpd_parse.h"

#include <string.h>
#include <strings.h>

const char *cm_net_httpd_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 101:
        return "Switching Protocols";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 417:
        return "Expectation Failed";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

size_t cm_net_httpd_head_end(const char *p, size_t n, size_t from)
{
    for (size_t i = from; i < n; i++) {
        if (p[i] != '\n') continue;
        if (i + 1 < n && p[i + 1] == '\n') return i + 2;
        if (i + 2 < n && p[i + 1] == '\r' && p[i + 2] == '\n') return i + 3;
    }
    return 0;
}

static bool S_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool S_has_token(const char *list, const char *tok)
{
    size_t tl = strlen(tok);
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *s = p;
        while (*p && *p != ',')
            p++;
        const char *e = p;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if ((size_t)(e - s) == tl && strncasecmp(s, tok, tl) == 0) return true;
    }
    return false;
}

int cm_net_httpd_parse_head(char *head, const httpd_opts *o, httpd_parsed *pr)
{
    char *line = head, *p;
    /* Line ends: "\r\n" or "\n"; a bare CR elsewhere is bad syntax. */
    for (p = head; *p; p++)
        if (*p == '\r' && p[1] != '\n') return 400;
    while (*line == '\r' || *line == '\n')
        line++; /* empty lines before the request */
    char *eol = strchr(line, '\n');
    if (!eol) return 400;
    if (eol > line && eol[-1] == '\r') eol[-1] = 0;
    *eol = 0;
    /* method SP target SP HTTP/1.x */
    char *sp1 = strchr(line, ' ');
    if (!sp1 || sp1 == line) return 400;
    *sp1 = 0;
    for (p = line; *p; p++)
        if (!S_tchar((unsigned char)*p)) return 400;
    char *target = sp1 + 1;
    char *sp2 = strchr(target, ' ');
    if (!sp2 || sp2 == target) return 400;
    *sp2 = 0;
    for (p = target; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) return 400;
    const char *ver = sp2 + 1;
    if (strncmp(ver, "HTTP/", 5) != 0 || ver[5] < '0' || ver[5] > '9' || ver[6] != '.' ||
        ver[7] < '0' || ver[7] > '9' || ver[8])
        return 400;
    if (ver[5] != '1') return 505;
    pr->rq.method = line;
    pr->rq.minor_version = ver[7] == '0' ? 0 : 1;
    /* absolute-form: keep the path */
    if (strncasecmp(target, "http://", 7) == 0 || strncasecmp(target, "https://", 8) == 0) {
        char *slash = strchr(strstr(target, "://") + 3, '/');
        target = slash ? slash : (char *)"/";
    }
    if (target[0] != '/' && strcmp(target, "*") != 0) return 400;
    pr->rq.target = target;

    size_t n = 0;
    bool have_cl = false, have_host = false, te = false, te_chunked = false;
    const char *conn_hdr = NULL;
    line = eol + 1;
    while (*line) {
        eol = strchr(line, '\n');
        if (!eol) return 400;
        if (eol > line && eol[-1] == '\r') eol[-1] = 0;
        *eol = 0;
        if (!*line) break;                             /* the blank line */
        if (*line == ' ' || *line == '\t') return 400; /* obsolete line folding */
        char *colon = strchr(line, ':');
        if (!colon || colon == line) return 400;
        *colon = 0;
        for (p = line; *p; p++)
            if (!S_tchar((unsigned char)*p)) return 400;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        char *ve = v + strlen(v);
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            *--ve = 0;
        for (p = v; *p; p++)
            if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f) return 400;
        if ((int)n >= o->max_headers) return 431;
        pr->hdrs[n].name = line;
        pr->hdrs[n].value = v;
        n++;
        if (strcasecmp(line, "Content-Length") == 0) {
            if (!*v || strlen(v) > 18) return strlen(v) > 18 ? 413 : 400;
            size_t cl = 0;
            for (p = v; *p; p++) {
                if (*p < '0' || *p > '9') return 400;
                cl = cl * 10 + (size_t)(*p - '0');
            }
            if (have_cl && cl != pr->content_length) return 400;
            have_cl = true;
            pr->content_length = cl;
        } else if (strcasecmp(line, "Transfer-Encoding") == 0) {
            te = true;
            if (S_has_token(v, "chunked")) te_chunked = true;
        } else if (strcasecmp(line, "Host") == 0) {
            if (have_host) return 400;
            have_host = true;
        } else if (strcasecmp(line, "Connection") == 0) {
            conn_hdr = v;
        } else if (strcasecmp(line, "Expect") == 0) {
            if (strcasecmp(v, "100-continue") != 0) return 417;
            pr->expect_continue = true;
        }
        line = eol + 1;
    }
    pr->rq.headers = pr->hdrs;
    pr->rq.nheaders = n;
    if (te) return te_chunked ? 411 : 501;
    if (pr->rq.minor_version == 1 && !have_host) return 400;
    if (pr->content_length > o->max_body) return 413;
    if (pr->rq.minor_version == 1)
        pr->keep_alive = !(conn_hdr && S_has_token(conn_hdr, "close"));
    else
        pr->keep_alive = conn_hdr && S_has_token(conn_hdr, "keep-alive");
    return 0;
}
