"use strict";
(function () {
  var table = document.getElementById("workloads");
  var controls = document.getElementById("controls");
  if (!table || !controls) return;
  var body = table.tBodies[0];
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var rows = Array.prototype.slice.call(body.rows);
  var texts = null;
  var query = document.getElementById("q");
  var selects = Array.prototype.slice.call(controls.querySelectorAll("select[data-col]"));
  var shown = document.getElementById("shown");
  var sort = { col: -1, dir: 1 };

  rows.forEach(function (row, i) { row.dataset.i = i; });

  function key(row, col) {
    var cell = row.cells[col];
    if (!cell) return "";
    if (heads[col].dataset.type === "num") {
      var v = parseFloat(cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent);
      return isNaN(v) ? -Infinity : v;
    }
    return cell.textContent;
  }

  function apply() {
    var q = query.value.trim().toLowerCase();
    if (q && !texts) texts = rows.map(function (row) { return row.textContent.toLowerCase(); });
    var wanted = selects.map(function (s) { return [Number(s.dataset.col), s.value]; });
    var count = 0;
    rows.forEach(function (row, i) {
      var ok = !q || texts[i].indexOf(q) !== -1;
      for (var j = 0; ok && j < wanted.length; j++) {
        if (wanted[j][1] && row.cells[wanted[j][0]].textContent.trim() !== wanted[j][1]) ok = false;
      }
      row.hidden = !ok;
      if (ok) count++;
    });
    shown.value = count === rows.length
      ? rows.length + " workloads"
      : count + " of " + rows.length + " workloads shown";
    remember();
  }

  function order() {
    var sorted = rows.slice();
    if (sort.col >= 0) {
      var col = sort.col, dir = sort.dir, num = heads[col].dataset.type === "num";
      var keys = rows.map(function (row) { return key(row, col); });
      sorted.sort(function (a, b) {
        var ka = keys[a.dataset.i], kb = keys[b.dataset.i];
        var c = num ? (ka < kb ? -1 : ka > kb ? 1 : 0)
                    : String(ka).localeCompare(String(kb), undefined, { numeric: true });
        return c * dir || a.dataset.i - b.dataset.i;
      });
    }
    var fragment = document.createDocumentFragment();
    sorted.forEach(function (row) { fragment.appendChild(row); });
    body.appendChild(fragment);
    heads.forEach(function (th, i) {
      if (!th.querySelector("button")) return;
      th.setAttribute("aria-sort", i === sort.col ? (sort.dir > 0 ? "ascending" : "descending") : "none");
    });
    remember();
  }

  function remember() {
    var parts = [];
    if (query.value) parts.push("q=" + encodeURIComponent(query.value));
    selects.forEach(function (s) { if (s.value) parts.push(encodeURIComponent(s.name) + "=" + encodeURIComponent(s.value)); });
    if (sort.col >= 0) parts.push("sort=" + (sort.dir < 0 ? "-" : "") + encodeURIComponent(heads[sort.col].dataset.key));
    try { history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname + location.search); } catch (e) { /* a file: URL may refuse */ }
  }

  function restore() {
    var state = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var at = part.indexOf("=");
      if (at > 0) {
        try { state[decodeURIComponent(part.slice(0, at))] = decodeURIComponent(part.slice(at + 1)); } catch (e) { /* ignored */ }
      }
    });
    if (state.q) query.value = state.q;
    selects.forEach(function (s) {
      if (state[s.name] && Array.prototype.some.call(s.options, function (o) { return o.value === state[s.name]; })) s.value = state[s.name];
    });
    if (state.sort) {
      var desc = state.sort.charAt(0) === "-";
      var name = desc ? state.sort.slice(1) : state.sort;
      heads.forEach(function (th, i) { if (th.dataset.key === name && th.querySelector("button")) { sort.col = i; sort.dir = desc ? -1 : 1; } });
    }
  }

  heads.forEach(function (th, i) {
    var button = th.querySelector("button");
    if (!button) return;
    button.addEventListener("click", function () {
      if (sort.col === i) sort.dir = -sort.dir;
      else { sort.col = i; sort.dir = th.dataset.type === "num" ? -1 : 1; }
      order();
    });
  });
  query.addEventListener("input", apply);
  selects.forEach(function (s) { s.addEventListener("change", apply); });
  controls.hidden = false;
  restore();
  if (sort.col >= 0) order();
  apply();
})();
