/*
 * delayq dashboard: served as /ui/assets/app.js, built into delayqd.
 *
 * No dependencies and nothing inline: the page's Content-Security-Policy
 * allows scripts and styles from /ui/assets/ only.  Values from the
 * server are put into the page with textContent and setAttribute, never
 * as HTML.  Without JavaScript every page still works: this only adds
 *   - live refresh: a <main id="content" data-refresh="N"> is fetched
 *     again every N seconds and its children replaced;
 *   - charts of the last hour in each <div class="chart"
 *     data-series="done|failed|lateness" data-queue="NAME|">, redrawn
 *     every 5 s from /ui/api/history;
 *   - state badges (paused, running, dead...) and a confirm() before a
 *     form with data-confirm is sent.
 * A 401 answer (the session ended) stops both loops and reloads the page,
 * which then shows the login form.
 */
'use strict';

(function () {
  var SVG = 'http://www.w3.org/2000/svg';
  var CHART_EVERY_MS = 5000;
  var stopped = false;

  /* The session is gone: stop asking, show the login page. */
  function loggedOut() {
    if (stopped) return;
    stopped = true;
    window.location.reload();
  }

  /* ---- state badges ---------------------------------------------------- */

  var STATES = ['paused', 'running', 'dead', 'delayed', 'processing', 'orphan',
                'unreadable', 'notfound'];

  /* Give the state cells a class from their text, so the CSS can color
   * them whatever the page's markup. */
  function decorate(root) {
    var cells = root.querySelectorAll('td.state, #queue-state, #job-state');
    for (var i = 0; i < cells.length; i++) {
      var text = cells[i].textContent.trim().toLowerCase();
      cells[i].classList.add('badge');
      for (var k = 0; k < STATES.length; k++)
        cells[i].classList.toggle('state-' + STATES[k], text === STATES[k]);
    }
    var counts = root.querySelectorAll('td.dead, dd.dead, td.due, dd.due');
    for (var j = 0; j < counts.length; j++) {
      var n = parseInt(counts[j].textContent, 10);
      counts[j].classList.toggle('nonzero', n > 0);
    }
  }

  /* ---- confirm before a destructive form --------------------------------- */

  document.addEventListener('submit', function (ev) {
    var form = ev.target;
    var msg = form && form.getAttribute && form.getAttribute('data-confirm');
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });

  /* ---- live refresh -------------------------------------------------------- */

  /* Whether the user is busy in `main`: typing in a field, or selecting
   * text to copy.  Replacing the content then would lose it. */
  function busyIn(main) {
    var a = document.activeElement;
    if (a && a !== document.body && main.contains(a) &&
        /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName)) return true;
    var sel = window.getSelection ? window.getSelection() : null;
    return !!(sel && !sel.isCollapsed && sel.anchorNode && main.contains(sel.anchorNode));
  }

  /* What the user typed into `root`'s fields and has not sent: keyed by
   * form id and field name. */
  function typedValues(root) {
    var kept = {};
    var fields = root.querySelectorAll('form[id] input[name], form[id] select[name]');
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === 'hidden' || f.type === 'submit') continue;
      var changed = f.tagName === 'SELECT'
        ? f.selectedIndex >= 0 && !f.options[f.selectedIndex].defaultSelected
        : f.value !== f.defaultValue;
      if (changed) kept[f.form.id + '/' + f.name] = f.value;
    }
    return kept;
  }

  function restoreValues(root, kept) {
    var fields = root.querySelectorAll('form[id] input[name], form[id] select[name]');
    for (var i = 0; i < fields.length; i++) {
      var key = fields[i].form.id + '/' + fields[i].name;
      if (Object.prototype.hasOwnProperty.call(kept, key)) fields[i].value = kept[key];
    }
  }

  function startRefresh(main) {
    var secs = parseFloat(main.getAttribute('data-refresh'));
    if (!(secs > 0)) return;
    var ms = Math.max(1000, secs * 1000);

    function next() {
      if (!stopped) window.setTimeout(round, ms);
    }

    function round() {
      if (stopped) return;
      if (document.hidden || busyIn(main)) {
        next();
        return;
      }
      window.fetch(window.location.href, {
        credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'text/html' }
      }).then(function (res) {
        if (res.status === 401) {
          loggedOut();
          return null;
        }
        if (!res.ok) throw new Error('HTTP ' + res.status);
        return res.text();
      }).then(function (text) {
        if (text === null || stopped) return;
        var doc = new DOMParser().parseFromString(text, 'text/html');
        if (doc.getElementById('login')) {
          loggedOut();
          return;
        }
        var fresh = doc.getElementById('content');
        if (!fresh) throw new Error('no #content in the answer');
        /* The user may have started typing while the answer came. */
        if (busyIn(main)) return;
        var kept = typedValues(main), nodes = [];
        while (fresh.firstChild) nodes.push(document.adoptNode(fresh.firstChild));
        main.replaceChildren.apply(main, nodes);
        restoreValues(main, kept);
        if (doc.title) document.title = doc.title;
        decorate(main);
        main.classList.remove('stale');
      }).catch(function () {
        main.classList.add('stale');    /* shown dimmed until the next answer */
      }).then(next);
    }

    next();
  }

  /* ---- charts ---------------------------------------------------------------- */

  var KINDS = {
    done: { title: 'Throughput', unit: 'jobs/s', lines: [['done', 'done']] },
    failed: { title: 'Failures', unit: 'failed/s', lines: [['failed', 'failed']] },
    lateness: { title: 'Lateness', unit: 'ms',
                lines: [['p50_ms', 'p50'], ['p99_ms', 'p99']] }
  };

  function el(name, attrs, text) {
    var e = document.createElementNS(SVG, name);
    for (var k in attrs)
      if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  /* A round number >= v for the top of an axis: 1, 2, 2.5 or 5 times a
   * power of ten. */
  function niceCeil(v) {
    if (!(v > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++)
      if (steps[i] * p >= v) return steps[i] * p;
    return 10 * p;
  }

  /* "120", "12.5", "2.75", "0.025": three significant digits at most. */
  function fmtNum(v) {
    if (v === null || v === undefined || isNaN(v)) return '-';
    if (Math.abs(v) >= 100) return String(Math.round(v));
    return String(parseFloat(v.toPrecision(3)));
  }

  /* "14:05" or "14:05:09", in UTC like every time the pages show. */
  function fmtClock(ms, seconds) {
    var d = new Date(ms);
    function two(n) { return (n < 10 ? '0' : '') + n; }
    return two(d.getUTCHours()) + ':' + two(d.getUTCMinutes()) +
           (seconds ? ':' + two(d.getUTCSeconds()) : '');
  }

  /* The series `values` (one a second, null: none) in `buckets` points:
   * rates averaged, lateness p50 averaged and p99 at its worst, so a
   * spike shows however narrow the chart. */
  function reduce(values, buckets, worst) {
    var n = values.length, step = Math.max(1, Math.ceil(n / buckets)), out = [];
    for (var start = n % step ? n % step - step : 0; start < n; start += step) {
      var sum = 0, have = 0, max = null;
      for (var i = Math.max(0, start); i < start + step; i++) {
        var v = values[i];
        if (v === null || v === undefined) continue;
        sum += v;
        have++;
        if (max === null || v > max) max = v;
      }
      out.push({ end: start + step - 1, v: have ? (worst ? max : sum / have) : null });
    }
    return out;
  }

  /* Draw one chart of `data` (the /ui/api/history answer) into `div`. */
  function drawChart(div, data) {
    var kind = KINDS[div.getAttribute('data-series')];
    if (!kind) return;
    /* Drawn at the size shown (the box inside the padding), so the text
     * is not scaled. */
    var cs = window.getComputedStyle(div);
    var inner = div.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    var W = Math.max(240, Math.floor(inner || 600)), H = 170;
    var ml = 48, mr = 12, mt = 26, mb = 24, pw = W - ml - mr, ph = H - mt - mb;
    var n = data.seconds, endMs = data.now_ms;
    if (!(n > 0)) return;
    var rate = kind.unit !== 'ms';
    var series = kind.lines.map(function (l, idx) {
      var raw = data[l[0]] || [];
      var pts = reduce(raw, Math.floor(pw / 2), !rate && idx === kind.lines.length - 1);
      return { key: l[1], pts: pts };
    });
    var max = 0;
    series.forEach(function (s) {
      s.pts.forEach(function (p) { if (p.v !== null && p.v > max) max = p.v; });
    });
    var top = niceCeil(max);
    function x(i) { return ml + (n > 1 ? i / (n - 1) : 1) * pw; }
    function y(v) { return mt + ph - (v / top) * ph; }

    var svg = el('svg', { viewBox: '0 0 ' + W + ' ' + H, width: W, height: H,
                          'class': 'dq-chart', role: 'img' });
    var last = series[0].pts.length ? series[0].pts[series[0].pts.length - 1].v : null;
    var summary = kind.title + ', last hour (' + kind.unit + '): now ' + fmtNum(last) +
                  ', peak ' + fmtNum(max);
    svg.appendChild(el('title', {}, summary));
    /* The page may title the chart itself: then only the unit here. */
    var titled = div.querySelector('h1, h2, h3, h4, h5, h6');
    svg.appendChild(el('text', { x: ml, y: 16, 'class': titled ? 'unit' : 'chart-title' },
                       titled ? kind.unit : kind.title + ' (' + kind.unit + ')'));

    /* Axes: three levels, and the clock every 15 minutes. */
    var axes = el('g', { 'class': 'axes' });
    [0, top / 2, top].forEach(function (v) {
      axes.appendChild(el('line', { x1: ml, x2: ml + pw, y1: y(v), y2: y(v),
                                    'class': v === 0 ? 'axis' : 'grid' }));
      axes.appendChild(el('text', { x: ml - 6, y: y(v) + 4, 'class': 'ylabel' }, fmtNum(v)));
    });
    for (var m = 60; m >= 0; m -= 15) {
      var i = n - 1 - m * 60;
      if (i < 0) continue;
      axes.appendChild(el('line', { x1: x(i), x2: x(i), y1: mt + ph, y2: mt + ph + 4,
                                    'class': 'axis' }));
      axes.appendChild(el('text', { x: x(i), y: H - 6, 'class': 'xlabel' },
                          m === 0 ? 'now' : fmtClock(endMs - m * 60000, false)));
    }
    svg.appendChild(axes);

    /* The lines, broken where there is no value; a lone value (a gap on
     * each side) as a dot, which a path of one point would not show. */
    series.forEach(function (s) {
      var d = '', area = '', run = 0, prev = null, dots = [];
      function endRun() {
        if (run) area += 'L' + x(prev).toFixed(1) + ',' + y(0).toFixed(1) + 'Z';
        if (run === 1) dots.push(prev);
        run = 0;
      }
      s.pts.forEach(function (p) {
        if (p.v === null) {
          endRun();
          return;
        }
        var px = x(p.end).toFixed(1), py = y(p.v).toFixed(1);
        area += (run ? '' : 'M' + px + ',' + y(0).toFixed(1)) + 'L' + px + ',' + py;
        d += (run ? 'L' : 'M') + px + ',' + py;
        run++;
        prev = p.end;
        p.y = py;
      });
      endRun();
      if (rate && area) svg.appendChild(el('path', { d: area, 'class': 'area area-' + s.key }));
      if (d) svg.appendChild(el('path', { d: d, 'class': 'line line-' + s.key }));
      s.pts.forEach(function (p) {
        if (p.v !== null && dots.indexOf(p.end) >= 0)
          svg.appendChild(el('circle', { cx: x(p.end).toFixed(1), cy: p.y, r: 2,
                                         'class': 'dot dot-' + s.key }));
      });
    });

    /* The legend, for more than one line (the readout takes its place
     * while the pointer is on the chart). */
    var legend = el('g', { 'class': 'legend' });
    if (series.length > 1) {
      var lx = ml + pw;
      for (var k = series.length - 1; k >= 0; k--) {
        legend.appendChild(el('text', { x: lx, y: 16, 'class': 'legend-' + series[k].key },
                              '\u2014 ' + series[k].key));
        lx -= 52;
      }
    }
    svg.appendChild(legend);

    /* Hover: a line at the pointer and the values there. */
    var cursor = el('line', { x1: 0, x2: 0, y1: mt, y2: mt + ph, 'class': 'cursor',
                              visibility: 'hidden' });
    var readout = el('text', { x: ml + pw, y: 16, 'class': 'readout',
                               visibility: 'hidden' });
    var hit = el('rect', { x: ml, y: mt, width: pw, height: ph, 'class': 'hit' });
    svg.appendChild(cursor);
    svg.appendChild(readout);
    svg.appendChild(hit);
    function show(ev) {
      div.dqPointer = { clientX: ev.clientX };
      var box = svg.getBoundingClientRect();
      var px = (ev.clientX - box.left) * (W / box.width);
      var pts = series[0].pts;
      if (!pts.length) return;
      var j = Math.round(((px - ml) / pw) * (pts.length - 1));
      j = Math.max(0, Math.min(pts.length - 1, j));
      var at = pts[j].end;
      cursor.setAttribute('x1', x(at));
      cursor.setAttribute('x2', x(at));
      cursor.setAttribute('visibility', 'visible');
      var parts = series.map(function (s) {
        var v = s.pts[j] ? s.pts[j].v : null;
        return (series.length > 1 ? s.key + ' ' : '') + fmtNum(v);
      });
      readout.textContent = fmtClock(endMs - (n - 1 - at) * 1000, true) + '  ' +
                            parts.join(' · ') + ' ' + kind.unit;
      readout.setAttribute('visibility', 'visible');
      legend.setAttribute('visibility', 'hidden');
    }
    function hide() {
      div.dqPointer = null;
      cursor.setAttribute('visibility', 'hidden');
      readout.setAttribute('visibility', 'hidden');
      legend.setAttribute('visibility', 'visible');
    }
    hit.addEventListener('pointermove', show);
    hit.addEventListener('pointerdown', show);
    hit.addEventListener('pointerleave', hide);

    var old = div.querySelector('svg.dq-chart');
    if (old) div.replaceChild(svg, old);
    else div.appendChild(svg);
    /* Redrawn under the pointer: keep showing the values there. */
    if (div.dqPointer) show(div.dqPointer);
    div.classList.remove('stale');
  }

  /* Fetch each queue's history once and draw its charts; again every 5 s. */
  function startCharts(divs) {
    var byQueue = {};
    for (var i = 0; i < divs.length; i++) {
      var q = divs[i].getAttribute('data-queue') || '';
      (byQueue[q] = byQueue[q] || []).push(divs[i]);
    }
    var latest = {};

    function load(q) {
      var url = '/ui/api/history' + (q ? '?queue=' + encodeURIComponent(q) : '');
      return window.fetch(url, { credentials: 'same-origin', cache: 'no-store',
                                 headers: { Accept: 'application/json' } })
        .then(function (res) {
          if (res.status === 401) {
            loggedOut();
            return null;
          }
          if (!res.ok) throw new Error('HTTP ' + res.status);
          return res.json();
        }).then(function (data) {
          if (!data || stopped) return;
          latest[q] = data;
          byQueue[q].forEach(function (div) { drawChart(div, data); });
        }).catch(function () {
          byQueue[q].forEach(function (div) { div.classList.add('stale'); });
        });
    }

    function round() {
      if (stopped) return;
      var all = [];
      if (!document.hidden)
        for (var q in byQueue)
          if (Object.prototype.hasOwnProperty.call(byQueue, q)) all.push(load(q));
      Promise.all(all).then(function () {
        if (!stopped) window.setTimeout(round, CHART_EVERY_MS);
      });
    }

    /* A new width: redraw from what we have. */
    var resizeTimer = null;
    window.addEventListener('resize', function () {
      window.clearTimeout(resizeTimer);
      resizeTimer = window.setTimeout(function () {
        for (var q in latest)
          if (Object.prototype.hasOwnProperty.call(latest, q))
            byQueue[q].forEach(function (div) { drawChart(div, latest[q]); });
      }, 150);
    });
    round();
  }

  function start() {
    decorate(document);
    var main = document.getElementById('content');
    if (main) startRefresh(main);
    var charts = document.querySelectorAll('div.chart[data-series]');
    if (charts.length && window.fetch) startCharts(charts);
  }

  if (document.readyState === 'loading')
    document.addEventListener('DOMContentLoaded', start);
  else
    start();
})();
