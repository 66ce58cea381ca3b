// folders.js lets the folders page's items be dragged onto a folder (or onto "Unfiled"):
// a drop sets the item's "move to" select and submits its form, which htmx posts like a
// click on Move would. Without JavaScript (or with a keyboard) the select and button do the
// same. Events are delegated to the document, so a re-rendered tree keeps working.
(function () {
  "use strict";
  var dragged = null;
  document.addEventListener("dragstart", function (e) {
    var item = e.target.closest && e.target.closest(".folder-item");
    if (!item) {
      return;
    }
    dragged = item;
    item.classList.add("dragging");
    e.dataTransfer.effectAllowed = "move";
    e.dataTransfer.setData("text/plain", item.getAttribute("data-item-id"));
  });
  document.addEventListener("dragend", function () {
    if (dragged) {
      dragged.classList.remove("dragging");
    }
    dragged = null;
    document.querySelectorAll(".drop-over").forEach(function (el) { el.classList.remove("drop-over"); });
  });
  function zoneOf(e) {
    return e.target.closest && e.target.closest(".folder-drop");
  }
  document.addEventListener("dragover", function (e) {
    var zone = zoneOf(e);
    if (!zone || !dragged) {
      return;
    }
    e.preventDefault();
    e.dataTransfer.dropEffect = "move";
    document.querySelectorAll(".drop-over").forEach(function (el) {
      if (el !== zone) { el.classList.remove("drop-over"); }
    });
    zone.classList.add("drop-over");
  });
  document.addEventListener("drop", function (e) {
    var zone = zoneOf(e);
    if (!zone || !dragged) {
      return;
    }
    e.preventDefault();
    zone.classList.remove("drop-over");
    var form = dragged.querySelector("form.move-form");
    var select = form && form.querySelector("select[name=folderId]");
    var target = zone.getAttribute("data-folder-id") || "";
    if (!select || select.value === target) {
      return;
    }
    select.value = target;
    if (form.requestSubmit) {
      form.requestSubmit();
    } else {
      form.submit();
    }
  });
})();
