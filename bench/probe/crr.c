/* The floor for `tcpdoctor probe --mode crr -c 1`: one thread, connect / send / read /
 * close in a loop, nothing recorded. Same protocol as the embedded server's TCP responder:
 * send REQ bytes, read REPLY bytes, close (the client closes first).
 *
 * usage: crr IP PORT SECONDS [REQ_BYTES REPLY_BYTES]
 * prints: connections=N failed=F elapsed_s=T conn_per_s=R
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s IP PORT SECONDS [REQ_BYTES REPLY_BYTES]\n", argv[0]);
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
        fprintf(stderr, "bad address %s\n", argv[1]);
        return 2;
    }
    double seconds = atof(argv[3]);
    size_t req = argc > 4 ? (size_t)atol(argv[4]) : 64;
    size_t reply = argc > 5 ? (size_t)atol(argv[5]) : 64;
    char *out = malloc(req), in[16384];
    memset(out, 'q', req);
    unsigned long ok = 0, failed = 0;
    double start = now(), end = start + seconds, t = start;
    while (t < end) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 ||
            send(fd, out, req, 0) != (ssize_t)req) {
            failed++;
        } else {
            size_t got = 0;
            ssize_t n = 1;
            while (got < reply && (n = read(fd, in, sizeof in)) > 0)
                got += (size_t)n;
            if (got >= reply)
                ok++;
            else
                failed++;
        }
        if (fd >= 0)
            close(fd);
        t = now();
    }
    double elapsed = t - start;
    printf("connections=%lu failed=%lu elapsed_s=%.3f conn_per_s=%.1f\n", ok, failed, elapsed,
           ok / elapsed);
    return 0;
}
