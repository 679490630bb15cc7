'use strict';
// delayq: the Node producer of the delayq delayed-job system.

const { Client } = require('./lib/client');
const { DelayqError, CODES } = require('./lib/errors');
const { parseDuration, MAX_AHEAD_MS } = require('./lib/when');
const { loadRedisConfig } = require('./lib/config');

module.exports = { Client, DelayqError, CODES, parseDuration, MAX_AHEAD_MS, loadRedisConfig };
