// benchflow view: table sorting and filtering, and live refresh of running jobs.
(function () {
  "use strict";

  function cellValue(row, index) {
    var cell = row.children[index];
    if (!cell) return "";
    var v = cell.getAttribute("data-sort");
    return v !== null ? v : cell.textContent.trim();
  }

  function sortable(table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, index) {
      th.addEventListener("click", function () {
        var asc = !th.classList.contains("asc");
        heads.forEach(function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a, index), y = cellValue(b, index);
          var nx = parseFloat(x), ny = parseFloat(y);
          var cmp = (!isNaN(nx) && !isNaN(ny) && String(nx) === x && String(ny) === y)
            ? nx - ny : x.localeCompare(y, undefined, {numeric: true});
          return asc ? cmp : -cmp;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }

  function filters(box) {
    var table = document.getElementById(box.getAttribute("data-table"));
    if (!table) return;
    var controls = box.querySelectorAll("[data-col]");
    var count = box.querySelector(".count");
    function apply() {
      var shown = 0, rows = table.tBodies[0].rows;
      for (var i = 0; i < rows.length; i++) {
        var row = rows[i], ok = true;
        controls.forEach(function (c) {
          var want = c.value.trim(), have = row.getAttribute("data-" + c.getAttribute("data-col")) || "";
          if (!want) return;
          if (c.getAttribute("data-op") === "min") ok = ok && have !== "" && parseFloat(have) >= parseFloat(want);
          else if (c.type === "search") ok = ok && have.toLowerCase().indexOf(want.toLowerCase()) >= 0;
          else ok = ok && have === want;
        });
        row.style.display = ok ? "" : "none";
        if (ok) shown++;
      }
      if (count) count.textContent = shown + " of " + rows.length + " trials";
    }
    controls.forEach(function (c) { c.addEventListener("input", apply); c.addEventListener("change", apply); });
    apply();
  }

  function init(root) {
    root.querySelectorAll("table.sortable").forEach(sortable);
    root.querySelectorAll(".filters").forEach(filters);
  }

  // Live refresh: while a job runs, fetch this page again and swap in the new content.
  function live() {
    var main = document.getElementById("live");
    if (!main || main.getAttribute("data-live") !== "1" || location.protocol === "file:") return;
    setTimeout(function () {
      fetch(location.href, {cache: "no-store"}).then(function (r) { return r.text(); }).then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live");
        if (!fresh) return;
        var open = {};
        main.querySelectorAll("details[open] > summary").forEach(function (s) { open[s.textContent] = true; });
        main.innerHTML = fresh.innerHTML;
        main.setAttribute("data-live", fresh.getAttribute("data-live") || "0");
        main.querySelectorAll("details > summary").forEach(function (s) { if (open[s.textContent]) s.parentNode.open = true; });
        init(main);
        live();
      }).catch(function () { setTimeout(live, 5000); });
    }, 3000);
  }

  init(document);
  live();
})();
