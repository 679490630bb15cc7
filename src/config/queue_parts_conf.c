#include "config/queue_parts_conf.h"

#include <libconfig.h>
#include <stdio.h>
#include <string.h>

#include "config/conf_reader.h"
#include "lib/keys.h"

/* The group of `queue` in the list `queues`, its index in *index; NULL
 * when none has that name. */
static config_setting_t *find_group(config_setting_t *queues, const char *queue,
                                    unsigned *index)
{
    unsigned count = (unsigned)config_setting_length(queues);
    for (unsigned i = 0; i < count; i++) {
        config_setting_t *q = config_setting_get_elem(queues, i);
        const char *name;
        if (config_setting_is_group(q) && config_setting_lookup_string(q, "name", &name)
            && strcmp(name, queue) == 0) {
            *index = i;
            return q;
        }
    }
    return NULL;
}

int queue_parts_conf_read(const char *path, const char *queue, unsigned *n, int *line,
                          char *err, size_t errlen)
{
    config_t cfg;
    config_init(&cfg);
    int found = conf_read_file(&cfg, path, err, errlen) < 0 ? -1 : 0;
    config_setting_t *queues = found < 0 ? NULL : config_lookup(&cfg, "queues");
    unsigned index = 0;
    config_setting_t *q = queues && config_setting_is_list(queues)
                          ? find_group(queues, queue, &index) : NULL;
    config_setting_t *s = q ? config_setting_get_member(q, "partitions") : NULL;
    if (s) {
        struct conf_reader r;
        conf_reader_init(&r, path, err, errlen);
        char prefix[40];
        snprintf(prefix, sizeof prefix, "queues.[%u].", index);
        long long v;
        found = conf_int(&r, s, prefix, 1, KEYS_PARTITIONS_MAX, &v) < 0 ? -1 : 1;
        if (found == 1) {
            *n = (unsigned)v;
            *line = (int)config_setting_source_line(s);
        }
    }
    config_destroy(&cfg);
    return found;
}
