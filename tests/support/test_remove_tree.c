// test_remove_tree (tests/support/test_support.h), which every test uses to remove its
// directory: it removes files, nested and read-only directories and symbolic
// links without following them (what a link points at survives), and refuses
// "" and "/". Run as root, it runs once more as nobody, to whom permissions apply.
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/test_support.h"

static const char *at(const char *base, const char *name) {
    static char path[4][512];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", base, name);
    return p;
}

static void check_remove(void) {
    char outside[] = "/tmp/asgd_remove_outside_XXXXXX", dir[] = "/tmp/asgd_remove_tree_XXXXXX";
    CHECK(test_remove_tree("") == -1);
    CHECK(test_remove_tree("/") == -1);
    CHECK(test_remove_tree("//") == -1);

    CHECK(mkdtemp(outside));
    test_write_file(outside, "keep.txt", "keep\n", 5);
    CHECK(mkdtemp(dir));
    test_write_file(dir, "a.txt", "a\n", 2);
    CHECK(mkdir(at(dir, "sub"), 0755) == 0);
    CHECK(mkdir(at(dir, "sub/deeper"), 0755) == 0);
    test_write_file(dir, "sub/deeper/b.txt", "b\n", 2);
    // A read-only directory with a file in it, one nothing may list, and links
    // to a directory and a file outside (and a dangling one).
    CHECK(mkdir(at(dir, "ro"), 0755) == 0);
    test_write_file(dir, "ro/c.txt", "c\n", 2);
    CHECK(chmod(at(dir, "ro"), 0555) == 0);
    CHECK(mkdir(at(dir, "closed"), 0755) == 0);
    CHECK(mkdir(at(dir, "closed/inner"), 0755) == 0);
    test_write_file(dir, "closed/inner/d.txt", "d\n", 2);
    CHECK(chmod(at(dir, "closed/inner"), 0) == 0);
    CHECK(chmod(at(dir, "closed"), 0) == 0);
    CHECK(symlink(outside, at(dir, "to_outside")) == 0);
    CHECK(symlink(at(outside, "keep.txt"), at(dir, "sub/to_keep")) == 0);
    CHECK(symlink("/nonexistent/asgd", at(dir, "dangling")) == 0);

    CHECK(test_remove_tree(dir) == 0);
    CHECK(access(dir, F_OK) != 0);
    CHECK(access(at(outside, "keep.txt"), F_OK) == 0);
    CHECK(test_remove_tree(dir) == -1);  // nothing left to remove

    // A link given as the directory itself is removed, not what it points at.
    CHECK(symlink(outside, dir) == 0);
    CHECK(test_remove_tree(dir) == 0);
    CHECK(access(at(outside, "keep.txt"), F_OK) == 0);

    setenv("ASGD_KEEP_TEST_DIR", "1", 1);
    CHECK(test_remove_tree(outside) == 0);
    CHECK(access(at(outside, "keep.txt"), F_OK) == 0);
    unsetenv("ASGD_KEEP_TEST_DIR");
    CHECK(test_remove_tree(outside) == 0);
    CHECK(access(outside, F_OK) != 0);
}

int main(void) {
    unsetenv("ASGD_KEEP_TEST_DIR");
    check_remove();
    if (geteuid() == 0) {
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
            check_remove();
            _exit(0);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        printf("again as nobody (uid 65534): passed\n");
    }
    printf("test_remove_tree: files, read-only and unreadable directories and links removed; links not followed\n");
    return 0;
}
