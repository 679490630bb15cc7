/* delayq dashboard: served as /ui/assets/app.js (no dependencies). */
'use strict';
