/*
 * mem.c: the output memory of preprocessing runs (modality.h), a list of
 * malloc'd blocks.
 */
#include <stdalign.h>

#include "base/mem.h"
#include "preprocess/modality.h"

struct prep_block {
    struct prep_block *next;
    alignas(16) unsigned char data[];
};

void prep_mem_init(struct prep_mem *mem, size_t limit)
{
    mem->blocks = NULL;
    mem->bytes = 0;
    mem->limit = limit;
}

void *prep_mem_alloc(struct prep_mem *mem, size_t n)
{
    if (n > mem->limit - mem->bytes)
        return NULL;
    struct prep_block *b = mem_alloc(sizeof *b + (n ? n : 1));
    if (!b)
        return NULL;
    b->next = mem->blocks;
    mem->blocks = b;
    mem->bytes += n;
    return b->data;
}

void prep_mem_release(struct prep_mem *mem)
{
    while (mem->blocks) {
        struct prep_block *b = mem->blocks;
        mem->blocks = b->next;
        mem_free(b);
    }
    mem->bytes = 0;
}
