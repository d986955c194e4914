/* The console's graphs — a thought's neighbourhood and a project's most connected thoughts — drawn with
 * Cytoscape.js from the page's JSON block (#graph-data). No inline script: the console's Content-Security-Policy
 * allows scripts from the console only. Without JavaScript the drawing stays hidden and the page's list (the same
 * thoughts, as links) serves alone.
 *
 * Legibility: labels are short (app/http/ui/graph.py cuts them) and drawn at LABEL_PX on screen whatever the zoom
 * (their model size follows the zoom), the full text shows in a tip on hover and keyboard focus, and edges carry
 * no label (their type is their colour and line style, named in the legend, and in the tip on hover).
 * Keyboard: the drawing takes focus; arrow keys walk the nodes (most connected first), Enter opens one. */
(function () {
  "use strict";
  var LABEL_PX = 13;
  var source = document.getElementById("graph-data");
  var box = document.getElementById("graph");
  if (!source || !box || typeof window.cytoscape !== "function") {
    return;
  }
  // Narrower labels in a narrow box (a phone): they overlap less; the tip holds the rest.
  var LABEL_WIDTH_PX = box.parentNode.clientWidth < 560 ? 96 : 150;
  var graph = JSON.parse(source.textContent);
  var tip = document.getElementById("graph-tip");
  var status = document.getElementById("graph-status");
  var elements = [];
  graph.nodes.forEach(function (node) {
    elements.push({ group: "nodes", data: node, classes: node.centre ? "centre" : "" });
  });
  graph.edges.forEach(function (edge) {
    elements.push({ group: "edges", data: edge });
  });
  box.hidden = false;
  var cy = window.cytoscape({
    container: box,
    elements: elements,
    boxSelectionEnabled: false,
    autoungrabify: true,
    minZoom: 0.2,
    maxZoom: 3,
    style: [
      {
        selector: "node",
        style: {
          "background-color": "data(colour)",
          "border-width": 1,
          "border-color": "#1b1f24",
          label: "data(label)",
          color: "#1b1f24",
          "font-size": LABEL_PX,
          "text-wrap": "ellipsis",
          "text-max-width": LABEL_WIDTH_PX + "px",
          "text-valign": "bottom",
          "text-margin-y": 3,
          "text-background-color": "#ffffff",
          "text-background-opacity": 0.85,
          "text-background-padding": "1px",
          width: 20,
          height: 20
        }
      },
      { selector: "node.centre", style: { width: 34, height: 34, "border-width": 4, "font-weight": "bold" } },
      { selector: "node.focused", style: { "border-width": 4, "border-color": "#b45309", "z-index": 10 } },
      {
        selector: "edge",
        style: {
          width: 2,
          "line-color": "data(colour)",
          "line-style": "data(line)",
          "target-arrow-color": "data(colour)",
          "target-arrow-shape": "triangle",
          "curve-style": "bezier"
        }
      },
      { selector: "edge.focused", style: { width: 4 } }
    ],
    layout: {
      name: "concentric",
      animate: false,
      fit: true,
      padding: 24,
      minNodeSpacing: 36,
      avoidOverlap: true,
      // The thought in the middle; on a project's graph, the most connected thoughts innermost.
      concentric: function (node) {
        return node.data("centre") ? 1000000 : node.data("degree") || 1;
      },
      levelWidth: function (nodes) {
        return graph.centre ? 1 : Math.max(1, nodes.maxDegree() / 4);
      }
    }
  });

  // The rings are circles; a wide box gets ellipses instead, so the drawing uses its width (labels sit side by side
  // more than above each other) rather than a third of it.
  function stretch() {
    var aspect = box.clientWidth / Math.max(1, box.clientHeight);
    if (aspect <= 1.2 || cy.nodes().length < 3) {
      return;
    }
    var factor = Math.min(aspect, 2.2);
    var middle = cy.nodes().boundingBox();
    var cx = (middle.x1 + middle.x2) / 2;
    cy.nodes().positions(function (node) {
      var at = node.position();
      return { x: cx + (at.x - cx) * factor, y: at.y };
    });
    cy.fit(undefined, 24);
  }
  stretch();

  // Labels at LABEL_PX on screen at any zoom: a model size of LABEL_PX / zoom.
  function scaleLabels() {
    var zoom = cy.zoom();
    cy.style()
      .selector("node")
      .style({ "font-size": LABEL_PX / zoom, "text-max-width": LABEL_WIDTH_PX / zoom + "px" })
      .update();
  }
  scaleLabels();
  cy.on("zoom", scaleLabels);

  // Most connected first (the centre first on a thought's page): the order the list under the drawing has.
  var order = cy.nodes().sort(function (a, b) {
    return (b.data("centre") ? 1 : 0) - (a.data("centre") ? 1 : 0) || (b.data("degree") || 0) - (a.data("degree") || 0);
  });
  var current = -1;

  function walk(id) {
    if (id && id !== graph.centre) {
      window.location.assign("/ui/thoughts/" + encodeURIComponent(id));
    }
  }

  function position(id) {
    var node = cy.getElementById(id);
    if (node.empty()) {
      return null;
    }
    var rendered = node.renderedPosition();
    var frame = box.getBoundingClientRect();
    return { x: frame.left + rendered.x, y: frame.top + rendered.y };
  }

  function labelPx(id) {
    var node = cy.getElementById(id);
    return node.empty() ? null : parseFloat(node.style("font-size")) * cy.zoom();
  }

  function showTip(text, at) {
    if (!tip) {
      return;
    }
    tip.textContent = text;
    tip.hidden = false;
    var left = Math.min(Math.max(at.x + 12, 4), Math.max(4, box.clientWidth - tip.offsetWidth - 4));
    var top = Math.min(at.y + 14, Math.max(4, box.clientHeight - tip.offsetHeight - 4));
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  }

  function hideTip() {
    if (tip) {
      tip.hidden = true;
    }
  }

  function describe(node) {
    var words = node.data("full") || node.data("label");
    var degree = node.data("degree");
    return words + " (" + node.data("status") + (degree ? ", " + degree + " edge" + (degree === 1 ? "" : "s") : "") + ")";
  }

  function focusNode(index) {
    cy.nodes().removeClass("focused");
    current = (index + order.length) % order.length;
    var node = order[current];
    node.addClass("focused");
    showTip(describe(node), node.renderedPosition());
    if (status) {
      status.textContent =
        current + 1 + " of " + order.length + ": " + describe(node) + (node.data("centre") ? "" : ". Enter opens it.");
    }
    return node;
  }

  cy.on("tap", "node", function (event) {
    walk(event.target.id());
  });
  cy.on("mouseover", "node", function (event) {
    box.style.cursor = event.target.data("centre") ? "default" : "pointer";
    showTip(describe(event.target), event.target.renderedPosition());
  });
  cy.on("mouseover", "edge", function (event) {
    event.target.addClass("focused");
    showTip(event.target.data("type"), event.renderedPosition || event.target.renderedMidpoint());
  });
  cy.on("mouseout", "node, edge", function (event) {
    box.style.cursor = "default";
    event.target.removeClass("focused");
    hideTip();
  });
  box.addEventListener("keydown", function (event) {
    var keys = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };
    if (event.key in keys) {
      focusNode(current < 0 ? 0 : current + keys[event.key]);
      event.preventDefault();
    } else if (event.key === "Home" || event.key === "End") {
      focusNode(event.key === "Home" ? 0 : order.length - 1);
      event.preventDefault();
    } else if (event.key === "Enter" && current >= 0) {
      walk(order[current].id());
      event.preventDefault();
    } else if (event.key === "Escape") {
      cy.nodes().removeClass("focused");
      hideTip();
      current = -1;
    }
  });
  box.addEventListener("blur", function () {
    cy.nodes().removeClass("focused");
    hideTip();
  });
  // The list mirrors the graph: focusing or hovering a thought's link marks its node and shows its tip.
  document.querySelectorAll(".graph-nodes a[data-node]").forEach(function (link) {
    var mark = function (on) {
      var node = cy.getElementById(link.getAttribute("data-node"));
      node.toggleClass("focused", on);
      if (on && !node.empty()) {
        showTip(describe(node), node.renderedPosition());
      } else {
        hideTip();
      }
    };
    link.addEventListener("focus", function () { mark(true); });
    link.addEventListener("blur", function () { mark(false); });
    link.addEventListener("mouseenter", function () { mark(true); });
    link.addEventListener("mouseleave", function () { mark(false); });
  });
  window.synaptoGraph = { cy: cy, walk: walk, position: position, labelPx: labelPx, focused: function () {
    return current < 0 ? null : order[current].id();
  } };
  box.setAttribute("data-ready", "true");
})();
