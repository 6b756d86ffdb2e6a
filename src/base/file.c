#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/mem.h"

int file_read(const char *path, size_t max, char **text, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char *buf = mem_alloc(max + 2);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    size_t n = 0;
    int rc = 0;
    while (n <= max) {
        ssize_t r = read(fd, buf + n, max + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (!rc && n > max)
        rc = -EFBIG;
    if (rc) {
        mem_free(buf);
        return rc;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}
