// issues-board.js moves issue cards between the status columns of the issue board by drag
// and drop: the card moves at once, the move is sent to the board (which PATCHes the issue's
// status through the API), and a refusal puts the card back where it was with the API's
// message on the card and in the page's live region. Each card's status select and Move
// button do the same without a mouse or without JavaScript.
(function () {
  "use strict";
  var dragged = null, from = null, before = null;

  function token() {
    var m = document.querySelector('meta[name="csrf-token"]');
    return m ? m.getAttribute("content") : "";
  }

  function announce(text) {
    var region = document.getElementById("board-message");
    if (region) {
      region.textContent = text;
    }
  }

  function textOf(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    return (doc.body.textContent || "").trim();
  }

  // refused keeps each refused card's message, so a live refresh of the columns (which
  // replaces the cards) shows it again while the card stays where it was put back.
  var refused = {};

  function mark(card, message) {
    card.classList.add("refused");
    var note = card.querySelector(".card-error");
    if (!note) {
      note = document.createElement("span");
      note.className = "card-error";
      note.setAttribute("role", "alert");
      card.appendChild(note);
    }
    note.textContent = message;
  }

  function refuse(card, origin, next, message) {
    var id = card.getAttribute("data-issue");
    refused[id] = { message: message, status: card.getAttribute("data-status") };
    if (document.body.contains(origin)) {
      origin.insertBefore(card, next && next.parentNode === origin ? next : null);
    } else {
      // A live refresh replaced the columns while the move was on its way: the fresh card
      // is already where the server has it.
      card = document.getElementById("card-" + id) || card;
    }
    mark(card, message);
    announce(message);
  }

  document.addEventListener("htmx:load", function () {
    Object.keys(refused).forEach(function (id) {
      var card = document.getElementById("card-" + id);
      if (card && card.getAttribute("data-status") === refused[id].status) {
        mark(card, refused[id].message);
      } else {
        delete refused[id];
      }
    });
  });

  function move(card, list, origin, next) {
    var status = list.getAttribute("data-status");
    if (status === card.getAttribute("data-status")) {
      return;
    }
    list.insertBefore(card, list.firstChild);
    delete refused[card.getAttribute("data-issue")];
    card.classList.remove("refused");
    var old = card.querySelector(".card-error");
    if (old) {
      old.remove();
    }
    var body = new URLSearchParams();
    body.set("status", status);
    fetch(card.getAttribute("data-move"), {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/x-www-form-urlencoded", "HX-Request": "true", "X-CSRF-Token": token() },
      body: body.toString()
    }).then(function (res) {
      return res.text().then(function (html) {
        if (!res.ok) {
          refuse(card, origin, next, textOf(html) || "The move was refused (" + res.status + ").");
          return;
        }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.body.firstElementChild;
        if (fresh && card.parentNode) {
          card.replaceWith(document.importNode(fresh, true));
        }
        announce(card.querySelector("a").textContent + " moved to " + status + ".");
      });
    }).catch(function () {
      refuse(card, origin, next, "The move could not be sent: check the connection and try again.");
    });
  }

  document.addEventListener("dragstart", function (e) {
    var card = e.target.closest && e.target.closest(".kanban .card");
    if (!card) {
      return;
    }
    dragged = card;
    from = card.parentNode;
    before = card.nextSibling;
    card.classList.add("dragging");
    e.dataTransfer.effectAllowed = "move";
    e.dataTransfer.setData("text/plain", card.getAttribute("data-issue"));
  });

  document.addEventListener("dragend", function () {
    if (dragged) {
      dragged.classList.remove("dragging");
    }
    document.querySelectorAll(".kanban .cards.over").forEach(function (l) { l.classList.remove("over"); });
  });

  document.addEventListener("dragover", function (e) {
    var col = dragged && e.target.closest && e.target.closest(".kanban .column");
    if (col) {
      e.preventDefault();
      e.dataTransfer.dropEffect = "move";
      col.querySelector(".cards").classList.add("over");
    }
  });

  document.addEventListener("dragleave", function (e) {
    var col = e.target.closest && e.target.closest(".kanban .column");
    if (col && !col.contains(e.relatedTarget)) {
      col.querySelector(".cards").classList.remove("over");
    }
  });

  document.addEventListener("drop", function (e) {
    var col = dragged && e.target.closest && e.target.closest(".kanban .column");
    if (!col) {
      return;
    }
    e.preventDefault();
    var card = dragged;
    dragged = null;
    move(card, col.querySelector(".cards"), from, before);
  });
})();
