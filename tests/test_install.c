/*
 * test_install.c — `make install` into a temporary DESTDIR/PREFIX, the prefix
 * then moved elsewhere: the moved program still finds llama.cpp and the
 * static model beside itself (no path of the build tree in it), and a tiny
 * program compiles and links against the installed library with nothing but
 * `pkg-config --cflags --libs clawmem` (clawmem.pc finds the moved prefix
 * from its own place) and runs with LD_LIBRARY_PATH or an rpath, as `make
 * install`'s note says. Also: when `make install` runs ldconfig.
 * Uses the build of the suite ($CLAWMEM_BIN's directory), already complete,
 * so make only copies files.
 */
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/embed/local.h"
#include "../src/embed/static_model.h"
#include "test.h"

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The file at path contains needle (n bytes). */
static bool file_has(const char *path, const char *needle)
{
    buf b = BUF_INIT;
    bool has = cm_fs_read_file(path, 256u << 20, &b, NULL, 0) == CM_OK &&
               memmem(b.data, b.len, needle, strlen(needle)) != NULL;
    cm_buf_release(&b);
    return has;
}

static const char prog[] = "#include <stdio.h>\n"
                           "#include <clawmem.h>\n"
                           "int main(int argc, char **argv)\n"
                           "{\n"
                           "    (void)argc;\n"
                           "    cm_options o = {0};\n"
                           "    o.workspace = argv[1];\n"
                           "    o.state_dir = argv[2];\n"
                           "    o.config_path = argv[3];\n"
                           "    cm_engine *e = NULL;\n"
                           "    char err[512], *js = NULL;\n"
                           "    if (cm_engine_open(&o, &e, err, sizeof err) || cm_engine_status(e, "
                           "0, &js, err, sizeof err)) {\n"
                           "        fprintf(stderr, \"%s\\n\", err);\n"
                           "        return 1;\n"
                           "    }\n"
                           "    puts(js);\n"
                           "    cm_free(js);\n"
                           "    cm_engine_close(e);\n"
                           "    return 0;\n"
                           "}\n";

TEST(install_moved_prefix_finds_its_files)
{
    const char *bin = getenv("CLAWMEM_BIN");
    if (!bin) bin = "build/clawmem";
    char *build = cm_fs_dirname(bin), cwd[4096];
    EXPECT(getcwd(cwd, sizeof cwd) != NULL);
    char *d = tmp_dir();
    char a_build[1100], a_prefix[100], a_dest[1100];
    snprintf(a_build, sizeof a_build, "BUILD=%s", build);
    snprintf(a_prefix, sizeof a_prefix, "PREFIX=/opt/clawmem");
    snprintf(a_dest, sizeof a_dest, "DESTDIR=%s/dest", d);
    /* STATIC_DONE= : install the static model only if `make` made it (no download here) */
    const char *mk[] = {"make",         "-s",      "--no-print-directory",
                        a_build,        a_prefix,  a_dest,
                        "STATIC_DONE=", "install", NULL};
    run_result r = run_cmd(NULL, mk);
    EXPECT_INT(r.status, 0);
    /* /opt/clawmem/lib is no directory of the loader's: no ldconfig, a note */
    EXPECT_CONTAINS(r.out, "make install: note: /opt/clawmem/lib is not a directory the loader "
                           "searches: link programs with -Wl,-rpath,/opt/clawmem/lib");
    EXPECT_CONTAINS(r.out, "LD_LIBRARY_PATH=/opt/clawmem/lib");
    run_result_release(&r);
    char prefix[1200], moved[1200];
    snprintf(prefix, sizeof prefix, "%s/dest/opt/clawmem", d);
    const char *files[] = {"bin/clawmem",
                           "lib/libclawmem.a",
                           "lib/libclawmem.so",
                           "lib/libclawmem.so.0",
                           "include/clawmem.h",
                           "lib/pkgconfig/clawmem.pc",
                           "share/man/man1/clawmem.1",
                           NULL};
    for (size_t i = 0; files[i]; i++)
        if (!exists(path_in(prefix, files[i])))
            test_fail(__FILE__, __LINE__, "not installed: %s", files[i]);
    EXPECT(file_has(path_in(prefix, "lib/pkgconfig/clawmem.pc"), "prefix=${pcfiledir}/../..\n"));
    EXPECT(!file_has(path_in(prefix, "lib/pkgconfig/clawmem.pc"), "/opt/clawmem"));
    char llama_abs[4200];
    snprintf(llama_abs, sizeof llama_abs, "%s/%s/llama", cwd, build);
    EXPECT(!file_has(path_in(prefix, "bin/clawmem"), llama_abs));
    EXPECT(!file_has(path_in(prefix, "lib/libclawmem.so.0"), llama_abs));
    char why[256];
    bool local = cm_local_supported(why, sizeof why);
    if (local)
        EXPECT(exists(path_in(prefix, "lib/clawmem/llama/libllama.v0.4.0.so")) ||
               !exists(path_in(build, "llama/lib/libllama.v0.4.0.so")));
    /* the static model: the one `make` installed, else a tiny one put in place */
    const char *sm = path_in(prefix, "share/clawmem/clawmem-static-100d.bin");
    if (!exists(sm)) {
        static const char *words[] = {"dog", "router"};
        static const float vecs[] = {1, 0, 0, 1};
        char err[256];
        EXPECT(cm_fs_mkdirs(path_in(prefix, "share/clawmem"), err, sizeof err) == CM_OK);
        EXPECT_INT(cm_static_model_write(sm, words, vecs, 2, 2, err, sizeof err), CM_OK);
    }
    /* the prefix moves: nothing may point back at where it was built or installed */
    snprintf(moved, sizeof moved, "%s/moved", d);
    EXPECT(rename(prefix, moved) == 0);
    write_file(d, "ws/memory/a.md", "Took the dog to the park.\n");
    write_file(d, "ws/memory/b.md", "Reset the router again.\n");
    write_file(d, "static.json", "{agents:{defaults:{memorySearch:{provider:'static'}}}}");
    char mbin[1300];
    snprintf(mbin, sizeof mbin, "%s/bin/clawmem", moved);
    const char *noenv[] = {"CLAWMEM_LLAMA_LIB=", NULL};
    const char *st1[] = {mbin,
                         "--workspace",
                         path_in(d, "ws"),
                         "--state-dir",
                         path_in(d, "s1"),
                         "--config",
                         path_in(d, "static.json"),
                         "search",
                         "dog",
                         "--json",
                         NULL};
    r = run_cmd(noenv, st1);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "\"provider\":\"static\"");
    EXPECT(!strstr(r.out, "\"fallback\""));
    run_result_release(&r);
    const char *gguf = getenv("CLAWMEM_TEST_GGUF");
    if (local && gguf && *gguf) {
        char cfg[5000];
        snprintf(cfg, sizeof cfg,
                 "{agents:{defaults:{memorySearch:{provider:'local',local:{modelPath:'%s/%s'}}}}}",
                 gguf[0] == '/' ? "" : cwd, gguf);
        write_file(d, "local.json", cfg);
        const char *lo[] = {mbin,
                            "--workspace",
                            path_in(d, "ws"),
                            "--state-dir",
                            path_in(d, "s2"),
                            "--config",
                            path_in(d, "local.json"),
                            "index",
                            NULL};
        r = run_cmd(noenv, lo);
        EXPECT_INT(r.status, 0);
        run_result_release(&r);
        const char *ls[] = {mbin,
                            "--workspace",
                            path_in(d, "ws"),
                            "--state-dir",
                            path_in(d, "s2"),
                            "--config",
                            path_in(d, "local.json"),
                            "status",
                            NULL};
        r = run_cmd(noenv, ls);
        EXPECT_INT(r.status, 0);
        EXPECT_CONTAINS(r.out, "Provider: local (requested: local)");
        EXPECT_CONTAINS(r.out, "Vectors: 2 ");
        run_result_release(&r);
    }
    /* pkg-config, compile and link against the installed (moved) library:
     * prog found at run time by LD_LIBRARY_PATH, prog_rpath by its rpath */
    write_file(d, "prog.c", prog);
    char pcpath[1400], script[8000];
    snprintf(pcpath, sizeof pcpath, "PKG_CONFIG_PATH=%s/lib/pkgconfig", moved);
    const char *san = getenv("CLAWMEM_SAN");
    snprintf(script, sizeof script,
             "cc -std=c11 %s %s/prog.c -o %s/prog $(pkg-config --cflags --libs clawmem) && "
             "cc -std=c11 %s %s/prog.c -o %s/prog_rpath $(pkg-config --cflags --libs clawmem) "
             "-Wl,-rpath,$(pkg-config --variable=libdir clawmem)",
             san ? san : "", d, d, san ? san : "", d, d);
    const char *pc_env[] = {pcpath, NULL};
    const char *cc[] = {"sh", "-c", script, NULL};
    r = run_cmd(pc_env, cc);
    EXPECT_INT(r.status, 0);
    EXPECT_STR(r.err, "");
    run_result_release(&r);
    char ldpath[1400];
    snprintf(ldpath, sizeof ldpath, "LD_LIBRARY_PATH=%s/lib", moved);
    const char *run_env[] = {ldpath, NULL};
    const char *run[] = {path_in(d, "prog"), path_in(d, "ws"), path_in(d, "s3"),
                         path_in(d, "static.json"), NULL};
    r = run_cmd(run_env, run);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "\"provider\":\"static\"");
    EXPECT_CONTAINS(r.out, "\"search\":\"hybrid\"");
    run_result_release(&r);
    const char *no_ld[] = {"LD_LIBRARY_PATH=", NULL};
    const char *run2[] = {path_in(d, "prog_rpath"), path_in(d, "ws"), path_in(d, "s4"),
                          path_in(d, "static.json"), NULL};
    r = run_cmd(no_ld, run2);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "\"provider\":\"static\"");
    run_result_release(&r);
    free(build);
}

/* The last step of `make install` (scripts/install-ldconfig.sh) with a fake
 * ldconfig that lists one directory: into a directory the loader searches,
 * ldconfig runs; staged in a DESTDIR, or anywhere else, it does not and a
 * note says what to do. */
TEST(install_ldconfig_only_in_a_loader_directory)
{
    char *d = tmp_dir();
    write_file(d, "ldconfig",
               "#!/bin/sh\n"
               "if [ \"$1\" = -v ]; then printf '%s: (from fake.conf:1)\\n\\tlibc.so.6 -> "
               "libc.so.6\\n' \"$LISTED\"; exit 0; fi\n"
               "echo \"ran $*\" >>\"$MARK\"\n");
    EXPECT(chmod(path_in(d, "ldconfig"), 0755) == 0);
    char ldc[1200], mark[1200], listed[1300], lib[1200], other[1300];
    snprintf(ldc, sizeof ldc, "LDCONFIG=%s/ldconfig", d);
    snprintf(mark, sizeof mark, "MARK=%s/mark", d);
    snprintf(lib, sizeof lib, "%s/p/lib", d);
    EXPECT(mkdir(path_in(d, "p"), 0755) == 0 && mkdir(lib, 0755) == 0);
    snprintf(listed, sizeof listed, "LISTED=%s", lib);
    snprintf(other, sizeof other, "LISTED=%s/elsewhere", d);
    const char *env_in[] = {ldc, mark, listed, NULL};
    const char *env_out[] = {ldc, mark, other, NULL};
    const char *sys[] = {"scripts/install-ldconfig.sh", "", lib, NULL};
    const char *staged[] = {"scripts/install-ldconfig.sh", path_in(d, "stage"), lib, NULL};
    run_result r = run_cmd(env_in, staged);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "staged in DESTDIR: run ldconfig once the files are in ");
    EXPECT(!exists(path_in(d, "mark")));
    run_result_release(&r);
    r = run_cmd(env_out, sys);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "is not a directory the loader searches");
    EXPECT(!exists(path_in(d, "mark")));
    run_result_release(&r);
    r = run_cmd(env_in, sys);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "is in the loader's cache");
    EXPECT(file_has(path_in(d, "mark"), "ran \n"));
    run_result_release(&r);
}
