/*
 * ui_assets: the dashboard's CSS and JavaScript (src/daemon/admin/assets/), built into the
 * binary by build-aux/embed-assets.sh: no files to install, no CDN.
 */
#ifndef DQ_UI_ASSETS_H
#define DQ_UI_ASSETS_H

#include <stddef.h>

struct ui_asset {
    const char *name;           /* "app.js" */
    const char *type;           /* "text/javascript; charset=utf-8" */
    const char *data;
    size_t len;
    const char *etag;           /* quoted, from a digest of the data */
};

/* The asset served as /ui/assets/NAME, or NULL. */
const struct ui_asset *ui_asset_find(const char *name);

#endif
